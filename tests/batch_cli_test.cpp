// needle run --batch and -f: every batch line's envelope equals what a single `needle run` with
// the same inputs prints (timing fields aside), failing lines give {"line","error"} objects and
// the run goes on; the JSONL request parser.
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "session/request.h"
#include "test_util.h"
#include "text/json_text.h"

using namespace needle::testing;
using nlohmann::json;

namespace {

// The envelope text with its three measured values replaced by "T": the rest is compared byte by
// byte.
std::string MaskTimings(const std::string& envelope) {
  static const std::regex timings(R"re("(prefill_tps|decode_tps|peak_ram_mb)":[-0-9.e+]+)re");
  return std::regex_replace(envelope, timings, "\"$1\":T");
}

// One batch request and the single-run arguments that must give the same envelope.
struct BatchCase {
  std::string line;                 // the JSONL line
  std::vector<std::string> single;  // `needle run` arguments after the model
};

}  // namespace

TEST_CASE("run --batch: each envelope equals a single run's and bad lines give error objects",
          "[cli][run][batch]") {
  const std::string model = ModelPath("small-crafted-0.8.cact");
  const std::string default_tools = std::string(NEEDLE_EXAMPLES_DIR) + "/tools.json";
  const json golden =
      json::parse(std::ifstream(DataPath("golden/session-v2/small-crafted-0.8.session.json")));
  TempDir dir;
  std::vector<BatchCase> cases;
  // 1. Only a query: --tools, --system and -n of the batch command apply.
  cases.push_back({R"({"query": "Set a timer for 5 minutes."})",
                   {"--tools", default_tools, "-n", "64", "Set a timer for 5 minutes."}});
  // 2.-4. Golden cases with their own tools (as written, with spaces), system and budget; one
  // with 7 tools (retrieval: no fixed prefix, each query picks 5).
  size_t file_index = 0;
  size_t with_system = 0, with_retrieval = 0;
  for (const json& c : golden["cases"]) {
    if (c["conversation"].get<bool>() || c["tools"].empty()) continue;
    const bool retrieval = c["tools"].size() > 5;
    const bool system = !c["system"].get<std::string>().empty();
    if (!(retrieval && with_retrieval == 0) && !(system && with_system == 0)) continue;
    (retrieval ? with_retrieval : with_system)++;
    const std::string tools_file = dir / ("tools" + std::to_string(file_index++) + ".json");
    std::ofstream(tools_file) << c["tools_text"].get<std::string>();
    for (const json& step : c["steps"]) {
      const std::string query = step["input"].get<std::string>();
      const int max_tokens = c["max_tokens"].get<int>();
      cases.push_back({"{\"tools\": " + c["tools_text"].get<std::string>() + ", \"query\": " +
                           json(query).dump() + ", \"system\": " + c["system"].dump() +
                           ", \"max_tokens\": " + std::to_string(max_tokens) + "}",
                       {"--tools", tools_file, "--system", c["system"].get<std::string>(), "-n",
                        std::to_string(max_tokens), query}});
    }
  }
  REQUIRE(with_system == 1);
  REQUIRE(with_retrieval == 1);
  // 5. A small budget (truncation) and an explicitly empty tools list.
  cases.push_back({R"({"query": "Turn on the kitchen light.", "max_tokens": 5})",
                   {"--tools", default_tools, "-n", "5", "Turn on the kitchen light."}});
  std::ofstream(dir / "empty.json") << "[]";
  cases.push_back({R"({"query": "Turn on the kitchen light.", "tools": []})",
                   {"--tools", dir / "empty.json", "-n", "64", "Turn on the kitchen light."}});
  // 6. The first request again, after the others used the same session.
  cases.push_back(cases.front());

  // The batch file: the good lines with bad ones and a blank one in between.
  const std::vector<std::string> bad = {
      R"({"query": "x",)",                         // invalid JSON
      R"({"tools": []})",                          // no query
      R"({"query": "x", "tools": [1]})",           // a tool that is no object
      R"({"query": "x", "max_tokens": -1})",       // negative budget
      R"({"query": "x", "temperature": 0.5})",     // unknown key
      R"(["query", "x"])",                         // not an object
      R"({"query": "x", "tools": {"name": "a"}})"  // tools not an array
  };
  std::string batch;
  std::vector<int> want;  // per output line: index into cases (>= 0) or -(input line number)
  int line_number = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    batch += cases[i].line + "\n";
    want.push_back(static_cast<int>(i));
    ++line_number;
    if (i < bad.size()) {
      batch += bad[i] + "\n";
      want.push_back(-(++line_number));
    }
    if (i == 2) {
      batch += "   \n";  // blank: no output
      ++line_number;
    }
  }
  REQUIRE(cases.size() >= bad.size());
  std::ofstream(dir / "batch.jsonl") << batch;

  const CliResult r = RunCli(
      {"run", model, "--tools", default_tools, "-n", "64", "-v", "--batch", dir / "batch.jsonl"});
  INFO(r.err);
  CHECK(r.exit_code == 1);  // some lines failed
  const std::vector<std::string> out = Lines(r.out);
  REQUIRE(out.size() == want.size());
  size_t errors = 0, compared = 0;
  std::map<std::vector<std::string>, std::string> single_out;  // a repeated request runs once
  for (size_t k = 0; k < out.size(); ++k) {
    INFO("output line " << k << ": " << out[k]);
    if (want[k] < 0) {
      const json e = json::parse(out[k]);
      CHECK(e["line"] == -want[k]);
      CHECK(!e["error"].get<std::string>().empty());
      CHECK(e.size() == 2);
      ++errors;
      continue;
    }
    // Every case; the first, the last (the first again) and every third in the sanitizer build.
    const size_t i = static_cast<size_t>(want[k]);
    if (i % kSanitizerCliStride != 0 && i + 1 != cases.size()) continue;
    std::vector<std::string> args = {"run", model};
    args.insert(args.end(), cases[i].single.begin(), cases[i].single.end());
    if (!single_out.count(args)) {
      const CliResult single = RunCli(args);
      REQUIRE(single.exit_code == 0);
      REQUIRE(!single.out.empty());
      single_out[args] = single.out.substr(0, single.out.size() - 1);
    }
    CHECK(MaskTimings(out[k]) == MaskTimings(single_out[args]));
    ++compared;
  }
  CHECK(errors == bad.size());
  CHECK(compared >= (cases.size() + kSanitizerCliStride - 1) / kSanitizerCliStride);
  // The messages name what is wrong.
  CHECK(r.out.find("invalid JSON") != std::string::npos);
  CHECK(r.out.find(R"(missing \"query\")") != std::string::npos);
  CHECK(r.out.find("tool #0 is a JSON number") != std::string::npos);
  CHECK(r.out.find(R"(unknown key \"temperature\")") != std::string::npos);
  CHECK(r.out.find(R"(\"tools\" is a JSON object)") != std::string::npos);
  // -v: one debug line per answered request; the repeated request reused its session's prefix,
  // the first one did not.
  const std::string debug = "needle: debug: ";
  const std::vector<std::string> verbose = Lines(r.err);
  REQUIRE(verbose.size() == cases.size());
  for (const std::string& line : verbose) REQUIRE(line.rfind(debug, 0) == 0);
  CHECK(json::parse(verbose.front().substr(debug.size()))["prefix_reused"] == false);
  CHECK(json::parse(verbose.back().substr(debug.size()))["prefix_reused"] == true);
}

TEST_CASE("run --batch: only good lines exit 0, stdin works, usage conflicts exit 2",
          "[cli][run][batch]") {
  const std::string model = ModelPath("tiny.cact");
  TempDir dir;
  const std::string lines = "{\"query\": \"hi\", \"max_tokens\": 8}\n{\"query\": \"yo\"}\n";
  std::ofstream(dir / "b.jsonl") << lines;
  CliResult r = RunCli({"run", model, "-n", "8", "--batch", dir / "b.jsonl"});
  CHECK(r.exit_code == 0);
  CHECK(Lines(r.out).size() == 2);
  const CliResult from_stdin = RunCli({"run", model, "-n", "8", "--batch", "-"}, lines);
  CHECK(from_stdin.exit_code == 0);
  CHECK(MaskTimings(from_stdin.out) == MaskTimings(r.out));
  // Empty file: nothing to answer, success.
  std::ofstream(dir / "empty.jsonl") << "";
  r = RunCli({"run", model, "--batch", dir / "empty.jsonl"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.empty());
  // Conflicts are refused, not ignored.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", model, "--batch", dir / "b.jsonl", "hi"},
        {"run", model, "--batch", dir / "b.jsonl", "--raw"},
        {"run", model, "--batch", dir / "b.jsonl", "--print-prompt"},
        {"run", model, "--batch", dir / "b.jsonl", "--json"},
        {"run", model, "--batch", dir / "b.jsonl", "-f", dir / "b.jsonl"},
        {"run", model, "--batch", "-", "--tools", "-"},
        {"run", model}}) {
    r = RunCli(args);
    INFO(args.back() << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(!r.err.empty());
  }
  // A missing batch file is an I/O error naming it.
  r = RunCli({"run", model, "--batch", dir / "nope.jsonl"});
  CHECK(r.exit_code == 3);
  CHECK(r.err.find("nope.jsonl") != std::string::npos);
}

TEST_CASE("run -f reads the query from a file", "[cli][run][batch]") {
  const std::string model = ModelPath("small.cact");
  const std::string tools = std::string(NEEDLE_EXAMPLES_DIR) + "/tools.json";
  TempDir dir;
  const std::string query = "Set a timer for 5 minutes.";
  std::ofstream(dir / "q.txt") << query << "\n";  // the final line break is dropped
  const CliResult from_file =
      RunCli({"run", model, "--tools", tools, "-n", "48", "-f", dir / "q.txt"});
  const CliResult from_arg = RunCli({"run", model, "--tools", tools, "-n", "48", query});
  REQUIRE(from_file.exit_code == 0);
  REQUIRE(from_arg.exit_code == 0);
  CHECK(MaskTimings(from_file.out) == MaskTimings(from_arg.out));
  const CliResult from_stdin =
      RunCli({"run", model, "--tools", tools, "-n", "48", "-f", "-"}, query);
  CHECK(MaskTimings(from_stdin.out) == MaskTimings(from_arg.out));
  // --print-prompt shows the query exactly (no line break kept, none added).
  const CliResult prompt = RunCli({"run", model, "--print-prompt", "--json", "-f", dir / "q.txt"});
  REQUIRE(prompt.exit_code == 0);
  CHECK(json::parse(prompt.out)["turn_text"] ==
        "\n" + query + "<|im_end|>\n<|im_start|>assistant\n");
  const CliResult missing = RunCli({"run", model, "-f", dir / "none.txt"});
  CHECK(missing.exit_code == 3);
  CHECK(missing.err.find("none.txt") != std::string::npos);
}

TEST_CASE("ParseRequest keeps tools as written and names what is wrong", "[batch]") {
  using needle::session::ParseRequest;
  const auto r =
      ParseRequest(R"({"query": "a \"b\"", "tools": [ {"name": "x", "n": 1.50} ], "system": "s",)"
                   R"( "max_tokens": 7})",
                   false);
  CHECK(r.query == "a \"b\"");
  REQUIRE(r.tools);
  CHECK(*r.tools == R"([{"name":"x","n":1.50}])");  // spelling kept (1.50), spaces gone
  CHECK(r.system == "s");
  CHECK(r.max_tokens == 7);
  CHECK(!r.expected);
  const auto e =
      ParseRequest(R"({"query": "q", "expected": [{"name": "f", "arguments": {}}]})", true);
  CHECK(*e.expected == R"([{"name":"f","arguments":{}}])");
  const std::pair<const char*, const char*> bad[] = {
      {R"({"query": 1})", R"("query" is a JSON number)"},
      {R"({"query": "q", "query": "r"})", "duplicate key \"query\""},
      {R"({"query": "q", "system": null})", R"("system" is a JSON null)"},
      {R"({"query": "q", "max_tokens": 1.5})", R"("max_tokens" is 1.5)"},
      {R"({"query": "q", "expected": []})", "unknown key \"expected\""},
      {R"({"query": "q"} x)", "invalid JSON"},
      {"42", "expected a JSON object, got a JSON number"},
  };
  for (const auto& [line, message] : bad) {
    INFO(line);
    try {
      (void)ParseRequest(line, false);
      FAIL("accepted");
    } catch (const needle::InvalidInput& ex) {
      CHECK(std::string(ex.what()).find(message) != std::string::npos);
    }
  }
  CHECK_THROWS_AS(ParseRequest(R"({"query": "q"})", true), needle::InvalidInput);  // no expected
}

TEST_CASE("ObjectMembers splits a minified object into keys and value texts", "[batch]") {
  const std::string m = needle::text::StripJsonWhitespace(
      R"({"a": [1, {"b": "}, ]"}], "c\"d": "x,y", "e": {}, "\u0066": -2e3})");
  const auto members = needle::text::ObjectMembers(m, "test");
  REQUIRE(members.size() == 4);
  CHECK(members[0].key == "a");
  CHECK(members[0].value == R"([1,{"b":"}, ]"}])");
  CHECK(members[1].key == "c\"d");
  CHECK(members[1].value == R"("x,y")");
  CHECK(members[2].value == "{}");
  CHECK(members[3].key == "f");
  CHECK(members[3].value == "-2e3");
  CHECK(needle::text::ObjectMembers("{}", "test").empty());
  CHECK_THROWS_AS(needle::text::ObjectMembers("[1]", "test"), needle::InvalidInput);
}
