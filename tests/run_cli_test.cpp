// needle run end to end: the rendered prompt equals the official engine's ids, and the first
// greedy token equals the argmax of the upstream reference logits for that same token stream.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_util.h"

using namespace needle::testing;
using nlohmann::json;

namespace {
std::vector<float> ReadF32(const std::string& path) {
  const auto b = ReadBytes(path);
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}
}  // namespace

TEST_CASE(
    "run --print-prompt renders the engine's ids and run's first token is the reference argmax",
    "[cli][run]") {
  for (const char* model : {"tiny", "small"}) {
    const json golden =
        json::parse(std::ifstream(DataPath(std::string("golden/") + model + "/golden.json")));
    for (size_t i = 0; i < golden["official"].size(); ++i) {
      INFO(model << " official entry " << i);
      const json& o = golden["official"][i];
      TempDir dir;
      std::ofstream(dir / "tools.json") << o["tools_text"].get<std::string>();
      const std::string model_path = ModelPath(std::string(model) + ".cact");
      std::vector<std::string> args = {"run",
                                       model_path,
                                       "--tools",
                                       dir / "tools.json",
                                       "--system",
                                       o["system"].get<std::string>(),
                                       o["query"].get<std::string>(),
                                       "--json",
                                       "--raw"};
      args.push_back("--print-prompt");
      CliResult r = RunCli(args);
      REQUIRE(r.exit_code == 0);
      const json p = json::parse(r.out);
      CHECK(p["prefix_ids"] == o["prefix_ids"]);
      CHECK(p["turn_ids"] == o["turn_ids"]);

      args.pop_back();
      args.insert(args.end(), {"-n", "1"});
      r = RunCli(args);
      REQUIRE(r.exit_code == 0);
      const json out = json::parse(r.out);
      REQUIRE(out["generated_ids"].size() == 1);
      // Reference entry i is exactly prefix_ids + turn_ids of official entry i (fixtures README).
      const json& ref = golden["reference"][i];
      REQUIRE(ref["ids"].size() == o["prefix_ids"].size() + o["turn_ids"].size());
      const auto logits = ReadF32(
          DataPath(std::string("golden/") + model + "/" + ref["last_logits"].get<std::string>()));
      const int argmax =
          static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      CHECK(out["generated_ids"][0] == argmax);
      CHECK(out["prefix_tokens"] == o["prefix_ids"].size());
      CHECK(out["peak_ram_mb"].get<double>() > 0);
    }
  }
}

TEST_CASE("run reports bad tools JSON and missing files clearly", "[cli][run]") {
  TempDir dir;
  std::ofstream(dir / "bad.json") << "[{\"name\": \"x\",}]";
  CliResult r = RunCli({"run", ModelPath("tiny.cact"), "--tools", dir / "bad.json", "hi"});
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("tools") != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  r = RunCli({"run", ModelPath("tiny.cact"), "--tools", dir / "nope.json", "hi"});
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("nope.json") != std::string::npos);
}

TEST_CASE("run --print-prompt --json names invalid UTF-8 in the query (no internal error)",
          "[cli][run]") {
  CliResult r =
      RunCli({"run", ModelPath("tiny.cact"), "--print-prompt", "--json", "caf\xe9 au lait"});
  CHECK(r.exit_code == 5);  // invalid input, not 70 (internal error)
  CHECK(r.err.find("not valid UTF-8 (byte 3 = 0xE9)") != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  // Without --json the prompt is printed as it is.
  r = RunCli({"run", ModelPath("tiny.cact"), "--print-prompt", "caf\xe9 au lait"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("caf\xe9 au lait") != std::string::npos);
}

TEST_CASE("run --print-prompt with more than 5 tools shows the engine's retrieved prefix",
          "[cli][run][retrieval]") {
  // Each fresh turn of the session-v2 case with 7 tools: the engine's rebuilt context starts with
  // the retrieved prefix (its debug line omits the BOS), which --print-prompt must render.
  const json golden =
      json::parse(std::ifstream(DataPath("golden/session-v2/small-crafted-0.8.session.json")));
  size_t checked = 0;
  for (const json& c : golden["cases"]) {
    if (c["tools"].size() <= 5 || c["conversation"].get<bool>()) continue;
    TempDir dir;
    std::ofstream(dir / "tools.json") << c["tools_text"].get<std::string>();
    for (const json& step : c["steps"]) {
      const auto ids = step["turn_ids"].get<std::vector<int32_t>>();
      const auto end = std::find(ids.begin(), ids.end(), 9);  // </tools>
      REQUIRE(end != ids.end());
      std::vector<int32_t> want{2};
      want.insert(want.end(), ids.begin(), end + 1);
      const CliResult r =
          RunCli({"run", ModelPath("small-crafted-0.8.cact"), "--tools", dir / "tools.json",
                  "--print-prompt", "--json", step["input"].get<std::string>()});
      REQUIRE(r.exit_code == 0);
      INFO(step["input"].get<std::string>());
      CHECK(json::parse(r.out)["prefix_ids"].get<std::vector<int32_t>>() == want);
      ++checked;
    }
  }
  CHECK(checked == 4);
}

TEST_CASE("run takes a JSON-array tool result as written and gives the engine's conversation",
          "[cli][run]") {
  // CLI11 splits a bracketed argument of a vector option into items unless told not to: the tool
  // result `[{"status":"sent"}]` reached the model as `{"status":"sent"}` and the confidence of
  // the later turns moved (0.2725 instead of the engine's 0.2780).
  const CliResult p =
      RunCli({"run", ModelPath("small.cact"), "--print-prompt", "[a,b]", "[{\"x\":1}]"});
  REQUIRE(p.exit_code == 0);
  CHECK(p.out.find("[a,b]<|im_end|>") != std::string::npos);
  // The session-v2 conversation with a tool result (TYPES tools, case 11) through `needle run`:
  // every envelope equals the engine's apart from the timing fields.
  const json golden = json::parse(std::ifstream(DataPath("golden/session-v2/small.session.json")));
  const json& c = golden["cases"][11];
  REQUIRE(c["conversation"].get<bool>());
  TempDir dir;
  std::ofstream(dir / "tools.json") << c["tools_text"].get<std::string>();
  std::vector<std::string> args{"run",     ModelPath("small.cact"),
                                "--tools", dir / "tools.json",
                                "-n",      std::to_string(c["max_tokens"].get<int>())};
  bool has_array_input = false;
  for (const json& step : c["steps"]) {
    args.push_back(step["input"].get<std::string>());
    has_array_input = has_array_input || args.back().front() == '[';
  }
  REQUIRE(has_array_input);
  const CliResult r = RunCli(args);
  REQUIRE(r.exit_code == 0);
  std::istringstream lines(r.out);
  std::string line;
  size_t si = 0;
  for (; std::getline(lines, line) && si < c["steps"].size(); ++si) {
    json ours = json::parse(line), theirs = c["steps"][si]["reply"];
    for (const char* k : {"prefill_tps", "decode_tps", "peak_ram_mb"}) {
      ours.erase(k);
      theirs.erase(k);
    }
    INFO("step " << si);
    CHECK(ours.dump() == theirs.dump());
  }
  CHECK(si == c["steps"].size());
}
