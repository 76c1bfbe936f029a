// needle embed: contrastive-head embeddings, deterministic, L2-normalized, and the very vectors
// tool retrieval ranks tools with (checked against `run --trace`'s similarity lines).
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "test_util.h"

using namespace needle::testing;
using nlohmann::json;

namespace {

json EmbedJson(const std::vector<std::string>& args, std::string* raw = nullptr) {
  std::vector<std::string> full = {"embed"};
  full.insert(full.end(), args.begin(), args.end());
  full.push_back("--json");
  const CliResult r = RunCli(full);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  REQUIRE(Lines(r.out).size() == 1);
  if (raw) *raw = r.out;
  return json::parse(r.out);
}

std::vector<float> Vector(const json& item) { return item["embedding"].get<std::vector<float>>(); }

}  // namespace

TEST_CASE("embed: deterministic, L2-normalized, one vector per text and per tool", "[cli][embed]") {
  const std::string model = ModelPath("small.cact");
  std::string first, second;
  const json j = EmbedJson({model, "Set a timer for 5 minutes.", "[1,2]", "hello"}, &first);
  EmbedJson({model, "Set a timer for 5 minutes.", "[1,2]", "hello"}, &second);
  CHECK(first == second);
  CHECK(j["model"] == model);
  CHECK(j["dim"] == 128);
  CHECK(j["tools"] == json::array());
  REQUIRE(j["texts"].size() == 3);
  CHECK(j["texts"][1]["text"] == "[1,2]");  // a bracketed argument arrives as written
  for (const json& item : j["texts"]) {
    const std::vector<float> e = Vector(item);
    REQUIRE(e.size() == 128);
    double norm = 0;
    for (float v : e) norm += double(v) * v;
    CHECK(std::fabs(std::sqrt(norm) - 1.0) < 1e-5);
  }
  CHECK(Vector(j["texts"][0]) != Vector(j["texts"][2]));
  // The threads do not change the result.
  std::string threaded;
  EmbedJson({model, "Set a timer for 5 minutes.", "[1,2]", "hello", "-t", "2"}, &threaded);
  CHECK(threaded == first);

  // A tool is embedded as its minified JSON: the same vector as that text given as a TEXT.
  TempDir dir;
  std::ofstream(dir / "tools.json")
      << R"([ {"name": "ping", "description": "Ping.", "parameters": {"type": "object",
             "properties": {}}}, {"name":"stop","description":"Stop.","parameters":{}} ])";
  const json t = EmbedJson({model, "--tools", dir / "tools.json"});
  REQUIRE(t["tools"].size() == 2);
  CHECK(t["texts"] == json::array());
  const std::string minified = t["tools"][0]["tool"];
  CHECK(minified.find(' ', minified.find("Ping.") + 5) == std::string::npos);
  const json again = EmbedJson({model, minified});
  CHECK(Vector(again["texts"][0]) == Vector(t["tools"][0]));

  // Human form: a header line and the values, one line per input.
  const CliResult h = RunCli({"embed", model, "hello"});
  REQUIRE(h.exit_code == 0);
  const std::vector<std::string> lines = Lines(h.out);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == "text 0: hello");

  // Usage: nothing to embed.
  CHECK(RunCli({"embed", model}).exit_code == 2);
}

TEST_CASE("embed gives the vectors run's tool retrieval ranks tools with",
          "[cli][embed][retrieval]") {
  // A session-v2 case with 7 tools (more than 5: each query retrieves 5 of them).
  const json golden =
      json::parse(std::ifstream(DataPath("golden/session-v2/small-crafted-0.8.session.json")));
  const std::string model = ModelPath("small-crafted-0.8.cact");
  size_t checked = 0;
  for (const json& c : golden["cases"]) {
    if (c["tools"].size() <= 5 || c["conversation"].get<bool>()) continue;
    TempDir dir;
    std::ofstream(dir / "tools.json") << c["tools_text"].get<std::string>();
    const std::string query = c["steps"][0]["input"];
    INFO(query);
    const json e = EmbedJson({model, "--tools", dir / "tools.json", query});
    REQUIRE(e["tools"].size() == c["tools"].size());
    const std::vector<float> q = Vector(e["texts"][0]);
    // run logs each tool's similarity (query . tool, summed in float in order) at trace level.
    const CliResult r = RunCli({"run", model, "--tools", dir / "tools.json", "-n", "1", "--trace",
                                "--log-level", "trace", query});
    REQUIRE(r.exit_code == 0);
    std::map<size_t, double> logged;
    const std::regex line("needle: trace: retrieval: tool (\\d+) similarity (-?[0-9.]+)");
    for (const std::string& l : Lines(r.err)) {
      std::smatch m;
      if (std::regex_match(l, m, line)) logged[std::stoul(m[1])] = std::stod(m[2]);
    }
    REQUIRE(logged.size() == c["tools"].size());
    for (size_t i = 0; i < e["tools"].size(); ++i) {
      const std::vector<float> t = Vector(e["tools"][i]);
      float dot = 0.f;
      for (size_t k = 0; k < q.size(); ++k) dot += q[k] * t[k];
      INFO("tool " << i);
      CHECK(std::fabs(dot - logged[i]) <= 5.1e-7);
    }
    ++checked;
  }
  CHECK(checked > 0);
}

TEST_CASE("embed --confidence is the head confidence run reports before any reply token",
          "[cli][embed]") {
  // run -n 0 generates nothing, so its Hc (the -v debug line) pools exactly the rendered prompt:
  // the same number as embed --confidence's probability, bit for bit, on both numeric paths and
  // with retrieval (7 tools: each query renders the 5 it retrieves).
  const json golden =
      json::parse(std::ifstream(DataPath("golden/session-v2/small-crafted-0.8.session.json")));
  std::string many_tools;
  for (const json& c : golden["cases"])
    if (c["tools"].size() > 5) many_tools = c["tools_text"].get<std::string>();
  REQUIRE(!many_tools.empty());
  TempDir dir;
  std::ofstream(dir / "many.json") << many_tools;
  const std::string two = std::string(NEEDLE_EXAMPLES_DIR) + "/tools.json";
  size_t combination = 0, checked = 0;
  const std::vector<std::string> all_numerics = {"official", "f32"};
  const std::vector<std::string> all_tools = {two, dir / "many.json"};
  const std::vector<std::string> queries = {"Set a timer for 5 minutes.", "hello there"};
  for (const std::string& numerics : all_numerics)
    for (const std::string& tools : all_tools)
      for (const std::string& query : queries) {
        // 0, 3, 6 in the sanitizer build: both numeric paths and both tool lists.
        if (combination++ % kSanitizerCliStride != 0) continue;
        INFO(numerics << " " << tools << " " << query);
        const std::string model = ModelPath("small-crafted-0.8.cact");
        const json e = EmbedJson({model, "--confidence", "--tools", tools, "--system", "Be brief.",
                                  "--numerics", numerics, query});
        REQUIRE(e["confidence"].size() == 1);
        const CliResult r = RunCli({"run", model, "--tools", tools, "--system", "Be brief.",
                                    "--numerics", numerics, "-n", "0", "-v", query});
        REQUIRE(r.exit_code == 0);
        const std::string prefix = "needle: debug: ";
        REQUIRE(r.err.rfind(prefix, 0) == 0);
        const json debug = json::parse(Lines(r.err).front().substr(prefix.size()));
        REQUIRE(debug["generated_ids"].empty());
        CHECK(e["confidence"][0]["probability"].get<double>() ==
              debug["head_confidence"].get<double>());
        ++checked;
      }
  CHECK(checked == (8 + kSanitizerCliStride - 1) / kSanitizerCliStride);
  // Text output, and a usage error without queries or with --system but no --confidence.
  const std::string model = ModelPath("small.cact");
  const CliResult text = RunCli({"embed", model, "--confidence", "hi"});
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("confidence logit") != std::string::npos);
  CHECK(RunCli({"embed", model, "--confidence"}).exit_code == 2);
  CHECK(RunCli({"embed", model, "--system", "x", "hi"}).exit_code == 2);
}
