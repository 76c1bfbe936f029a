// needle run end to end: the rendered prompt equals the official engine's ids, and the first
// greedy token equals the argmax of the upstream reference logits for that same token stream.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

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
