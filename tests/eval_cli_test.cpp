// needle eval: its accuracy, per-tool counts and failure list are those the test computes itself
// from the model's own replies to the same requests (through run --batch) and the fixture's
// expected calls, some of which were taken from those replies and some made wrong on purpose.
#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"
#include "text/json_text.h"

using namespace needle::testing;
using nlohmann::json;

namespace {

// The request line without its "expected" member, every other member as written.
std::string WithoutExpected(const std::string& line) {
  const std::string minified = needle::text::StripJsonWhitespace(line);
  std::string out = "{";
  for (const auto& m : needle::text::ObjectMembers(minified, "test")) {
    if (m.key == "expected") continue;
    if (out.size() > 1) out += ",";
    out += json(m.key).dump() + ":" + std::string(m.value);
  }
  return out + "}";
}

// Exact-call match, written independently of the library: same size and every expected
// {name, arguments} equal to a distinct produced one.
bool Exact(const json& got, const json& expected) {
  if (got.size() != expected.size()) return false;
  std::vector<bool> used(got.size(), false);
  for (const json& e : expected) {
    const json want = {{"name", e["name"]}, {"arguments", e.value("arguments", json::object())}};
    bool found = false;
    for (size_t i = 0; i < got.size() && !found; ++i) {
      const json have = {{"name", got[i]["name"]},
                         {"arguments", got[i].value("arguments", json::object())}};
      if (!used[i] && have == want) used[i] = found = true;
    }
    if (!found) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("eval scores the model's replies exactly as computed from them", "[cli][eval]") {
  const std::string model = ModelPath("small-crafted-0.5.cact");
  const std::string tools = std::string(NEEDLE_EXAMPLES_DIR) + "/tools.json";
  const std::string data = DataPath("eval/small-crafted-0.5.jsonl");
  const auto bytes = ReadBytes(data);
  const std::vector<std::string> lines = Lines(std::string(bytes.begin(), bytes.end()));
  REQUIRE(lines.size() >= 6);

  // The replies eval has to score: the same requests through run --batch.
  TempDir dir;
  std::string batch;
  for (const std::string& line : lines) batch += WithoutExpected(line) + "\n";
  std::ofstream(dir / "requests.jsonl") << batch;
  const CliResult replies =
      RunCli({"run", model, "--tools", tools, "--batch", dir / "requests.jsonl"});
  REQUIRE(replies.exit_code == 0);
  const std::vector<std::string> envelopes = Lines(replies.out);
  REQUIRE(envelopes.size() == lines.size());

  size_t exact = 0;
  std::map<std::string, std::pair<size_t, size_t>> per_tool;  // name ("" = no call): lines, exact
  std::vector<size_t> failed_lines;
  for (size_t i = 0; i < lines.size(); ++i) {
    const json expected = json::parse(lines[i])["expected"];
    const json reply = json::parse(envelopes[i]);
    const bool ok = reply["success"].get<bool>() && Exact(reply["function_calls"], expected);
    exact += ok;
    if (!ok) failed_lines.push_back(i + 1);
    std::vector<std::string> names;
    for (const json& c : expected) names.push_back(c["name"].get<std::string>());
    if (names.empty()) names.push_back("");
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    for (const std::string& n : names) {
      per_tool[n].first++;
      per_tool[n].second += ok;
    }
  }
  // The fixture discriminates: some lines right, some wrong.
  REQUIRE(exact > 0);
  REQUIRE(exact < lines.size());

  const CliResult r = RunCli({"eval", model, data, "--tools", tools, "--json"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out);
  CHECK(j["lines"] == lines.size());
  CHECK(j["exact"] == exact);
  CHECK(j["accuracy"].get<double>() == Approx(double(exact) / double(lines.size())));
  CHECK(j["errors"] == 0);
  CHECK(j["pass"] == true);
  REQUIRE(j["tools"].size() == per_tool.size());
  for (const json& t : j["tools"]) {
    const std::string name = t["name"].is_null() ? "" : t["name"].get<std::string>();
    INFO("tool " << name);
    REQUIRE(per_tool.count(name) == 1);
    CHECK(t["lines"] == per_tool[name].first);
    CHECK(t["exact"] == per_tool[name].second);
  }
  std::vector<size_t> listed;
  for (const json& f : j["failures"]) listed.push_back(f["line"].get<size_t>());
  CHECK(listed == failed_lines);

  // Text form: the same totals and failing lines.
  const CliResult text = RunCli({"eval", model, data, "--tools", tools});
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find(std::to_string(exact) + "/" + std::to_string(lines.size()) +
                      " exact calls") != std::string::npos);
  for (size_t line : failed_lines)
    CHECK(text.out.find("  line " + std::to_string(line) + ": ") != std::string::npos);

  // --min-accuracy: just below the accuracy passes, just above fails with exit 1.
  const double below = (double(exact) - 0.5) / double(lines.size());
  const double above = (double(exact) + 0.5) / double(lines.size());
  CHECK(RunCli({"eval", model, data, "--tools", tools, "--min-accuracy", std::to_string(below)})
            .exit_code == 0);
  const CliResult gate =
      RunCli({"eval", model, data, "--tools", tools, "--min-accuracy", std::to_string(above)});
  CHECK(gate.exit_code == 1);
  CHECK(gate.err.find("below --min-accuracy") != std::string::npos);
  CHECK(RunCli({"eval", model, data, "--min-accuracy", "1.5"}).exit_code == 2);
}

TEST_CASE("eval lists lines it cannot run and counts them as not exact", "[cli][eval]") {
  const std::string model = ModelPath("tiny.cact");
  TempDir dir;
  std::ofstream(dir / "d.jsonl") << R"({"query": "hi", "max_tokens": 4})"
                                    "\n"
                                 << R"({"query": "hi", "expected": [{"name": 1}]})"
                                    "\n"
                                 << "\n"
                                 << R"({"query": "hi", "expected": [], "max_tokens": 4})"
                                    "\n";
  const CliResult r = RunCli({"eval", model, dir / "d.jsonl", "--json"});
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out);
  CHECK(j["lines"] == 3);
  CHECK(j["errors"] == 2);
  REQUIRE(j["failures"].size() >= 2);
  CHECK(j["failures"][0]["line"] == 1);
  CHECK(j["failures"][0]["error"].get<std::string>().find(R"(missing "expected")") !=
        std::string::npos);
  CHECK(j["failures"][1]["line"] == 2);
  CHECK(j["failures"][1]["error"].get<std::string>().find("\"name\" is a JSON number") !=
        std::string::npos);
  std::ofstream(dir / "blank.jsonl") << "\n\n";
  const CliResult empty = RunCli({"eval", model, dir / "blank.jsonl"});
  CHECK(empty.exit_code == 5);
  CHECK(empty.err.find("no requests") != std::string::npos);
}
