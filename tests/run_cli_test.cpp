// needle run end to end: the rendered prompt equals the official engine's ids, and the first
// greedy token equals the argmax of the upstream reference logits for that same token stream.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "format/cact.h"
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
                                       "--json"};
      args.push_back("--print-prompt");  // (--print-prompt excludes --raw)
      CliResult r = RunCli(args);
      REQUIRE(r.exit_code == 0);
      const json p = json::parse(r.out);
      CHECK(p["prefix_ids"] == o["prefix_ids"]);
      CHECK(p["turn_ids"] == o["turn_ids"]);

      args.pop_back();
      args.insert(args.end(), {"--raw", "-n", "1"});
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
  // (--print-prompt shows the first query only, so it takes one.)
  const CliResult p = RunCli({"run", ModelPath("small.cact"), "--print-prompt", "[a,b]"});
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

namespace {
// An envelope without its measured fields (prefill_tps, decode_tps, peak_ram_mb).
nlohmann::json Untimed(const std::string& envelope) {
  nlohmann::json j = nlohmann::json::parse(envelope);
  for (const char* k : {"prefill_tps", "decode_tps", "peak_ram_mb"}) j.erase(k);
  return j;
}
}  // namespace

TEST_CASE("run --interactive: a conversation on stdin with /reset, /tools, /system", "[cli][run]") {
  const std::string model = ModelPath("small.cact");
  const std::string tools = std::string(NEEDLE_EXAMPLES_DIR) + "/tools.json";
  const std::string q = "Set a timer for 5 minutes.";
  // The same query after /reset and after /tools (same file) is a fresh first turn each time: the
  // same envelope as a single `needle run`. An unknown command and a missing file are errors on
  // stderr that leave the session running; /quit ends it.
  const std::string script = q + "\n/reset\n" + q + "\n/bogus\n/tools /nonexistent.json\n/tools " +
                             tools + "\n" + q + "\n/quit\n" + q + "\n";
  const CliResult r = RunCli({"run", model, "--tools", tools, "-n", "24", "-i"}, script);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<std::string> lines = Lines(r.out);
  REQUIRE(lines.size() == 3);  // nothing after /quit
  const CliResult single = RunCli({"run", model, "--tools", tools, "-n", "24", q});
  REQUIRE(single.exit_code == 0);
  for (const std::string& line : lines) CHECK(Untimed(line) == Untimed(Lines(single.out)[0]));
  CHECK(r.err.find("unknown command /bogus") != std::string::npos);
  CHECK(r.err.find("/nonexistent.json") != std::string::npos);
  // Two queries in a row continue the conversation, as two QUERY arguments do.
  const CliResult convo = RunCli({"run", model, "--tools", tools, "-n", "24", "-i"}, "hi\nthere\n");
  const CliResult args = RunCli({"run", model, "--tools", tools, "-n", "24", "hi", "there"});
  REQUIRE(convo.exit_code == 0);
  REQUIRE(Lines(convo.out).size() == 2);
  CHECK(Untimed(Lines(convo.out)[1]) == Untimed(Lines(args.out)[1]));
  // /system changes the prompt (and resets): the reply is that of --system.
  const CliResult sys =
      RunCli({"run", model, "--tools", tools, "-n", "24", "-i"}, "/system Be brief.\n" + q + "\n");
  const CliResult sys_arg =
      RunCli({"run", model, "--tools", tools, "-n", "24", "--system", "Be brief.", q});
  REQUIRE(Lines(sys.out).size() == 1);
  CHECK(Untimed(Lines(sys.out)[0]) == Untimed(Lines(sys_arg.out)[0]));
  // Refused with it: queries, --batch, --raw, --print-prompt, --json, --tools on stdin.
  CHECK(RunCli({"run", model, "-i", "hi"}).exit_code == 2);
  CHECK(RunCli({"run", model, "-i", "--raw"}).exit_code == 2);
  CHECK(RunCli({"run", model, "-i", "--json"}).exit_code == 2);
  CHECK(RunCli({"run", model, "-i", "--tools", "-"}).exit_code == 2);
}

TEST_CASE("run: --kv-window changes the attention window, --report writes bench records",
          "[cli][run]") {
  const std::string model = ModelPath("small.cact");
  const std::string tools = std::string(NEEDLE_EXAMPLES_DIR) + "/tools.json";
  const std::string q =
      "Set a timer for 5 minutes and turn on the kitchen light please and also the bedroom one";
  auto envelope = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"run", model, "--tools", tools, "-n", "30"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back(q);
    const CliResult r = RunCli(args);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return Untimed(Lines(r.out)[0]);
  };
  // The header's window (256) given explicitly changes nothing; a 2-position window does.
  const auto header = needle::format::CactFile::Open(model, needle::format::LoadMode::kRead);
  const std::string w = std::to_string(header.geometry().kv_window);
  CHECK(envelope({"--kv-window", w}) == envelope({}));
  CHECK(envelope({"--kv-window", "2"}) != envelope({}));
  CHECK(RunCli({"run", model, "--kv-window", "0", "hi"}).exit_code == 2);
  CHECK(RunCli({"run", model, "--kv-window", "4096", "hi"}).exit_code == 2);

  // --report: one record per turn; the first turn's prompt is the prefix plus the turn.
  TempDir dir;
  const std::string report = dir / "report.json";
  CliResult r =
      RunCli({"run", model, "--tools", tools, "-n", "12", "--report", report, "hi", "there"});
  REQUIRE(r.exit_code == 0);
  const auto bytes = ReadBytes(report);
  const nlohmann::json j = nlohmann::json::parse(std::string(bytes.begin(), bytes.end()));
  REQUIRE(j["records"].size() == 2);
  const CliResult prompt =
      RunCli({"run", model, "--tools", tools, "--print-prompt", "--json", "hi"});
  const nlohmann::json p = nlohmann::json::parse(prompt.out);
  const auto& first = j["records"][0];
  CHECK(first["prompt_tokens"] == p["prefix_ids"].size() + p["turn_ids"].size());
  CHECK(first["gen_tokens"].get<int>() > 0);
  CHECK(first["first_token_ms"].get<double>() > 0);
  CHECK(first["first_token_ms"].get<double>() <= first["total_ms"].get<double>());
  CHECK(first["peak_rss_bytes"].get<double>() > 0);
  CHECK(j["records"][1]["prompt_tokens"].get<int>() < first["prompt_tokens"].get<int>());
  CHECK(j["system"]["commit"].is_string());
  // --batch: one record per answered line; the error line adds none.
  const std::string batch = dir / "b.jsonl";
  std::ofstream(batch) << "{\"query\": \"hi\"}\n{\"query\": 42}\n{\"query\": \"there\"}\n";
  r = RunCli({"run", model, "--tools", tools, "-n", "8", "--batch", batch, "--report", report});
  CHECK(r.exit_code == 1);
  const auto b2 = ReadBytes(report);
  CHECK(nlohmann::json::parse(std::string(b2.begin(), b2.end()))["records"].size() == 2);
}

TEST_CASE("run --enforce-schema keeps values in the schema's range where the engine does not",
          "[cli][run]") {
  // A session-v2 golden turn where the official engine writes "hour":444... (maximum 23) until
  // the budget ends; with --enforce-schema the hour is a valid one and the call closes.
  const json golden =
      json::parse(std::ifstream(DataPath("golden/session-v2/small-crafted-0.8.session.json")));
  const json& c = golden["cases"][3];
  TempDir dir;
  std::ofstream(dir / "tools.json") << c["tools_text"].get<std::string>();
  const std::string model = ModelPath("small-crafted-0.8.cact");
  const std::string query = c["steps"][0]["input"];
  auto calls = [&](bool enforce) {
    std::vector<std::string> args = {"run", model, "--tools", dir / "tools.json", "-n", "50", "-v"};
    if (enforce) args.push_back("--enforce-schema");
    args.push_back(query);
    const CliResult r = RunCli(args);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const std::string prefix = "needle: debug: ";
    REQUIRE(r.err.rfind(prefix, 0) == 0);
    return json::parse(Lines(r.err).front().substr(prefix.size()))["calls"].get<std::string>();
  };
  const std::string engine = calls(false), strict = calls(true);
  CHECK(engine.find("\"hour\":44444") != std::string::npos);
  CHECK(strict.find("\"hour\":44") == std::string::npos);
  CHECK(strict.find("\"hour\":4}") != std::string::npos);
  // Refused where nothing is generated under the call grammar.
  CHECK(RunCli({"run", model, "--raw", "--enforce-schema", "hi"}).exit_code == 2);
  CHECK(RunCli({"run", model, "--print-prompt", "--enforce-schema", "hi"}).exit_code == 2);
}
