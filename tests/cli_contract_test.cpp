// CLI contracts: --json on dequant / requant / synth (checked against the files written), option
// combinations that would be ignored are refused, and every usage error ends with a hint.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "format/cact.h"
#include "format/safetensors.h"
#include "format/sha256.h"
#include "test_util.h"

using namespace needle::testing;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Runs needle and parses its stdout, which must be exactly one compact JSON line.
json RunJson(const std::vector<std::string>& args) {
  const CliResult r = RunCli(args);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<std::string> lines = Lines(r.out);
  REQUIRE(lines.size() == 1);
  REQUIRE(r.out.back() == '\n');
  // Compact: no spaces or line breaks added (ordered_json keeps the printed key order).
  CHECK(nlohmann::ordered_json::parse(lines[0]).dump() == lines[0]);
  return json::parse(lines[0]);
}

// A {"path", "bytes", "sha256"} record equals the file at `path` now.
void CheckFileRecord(const json& record, const std::string& path) {
  INFO(path);
  CHECK(record["path"] == path);
  REQUIRE(fs::exists(path));
  CHECK(record["bytes"] == fs::file_size(path));
  const std::vector<uint8_t> bytes = ReadBytes(path);
  CHECK(record["sha256"] == needle::format::Sha256Hex(bytes));
}

std::string Sha256Of(const std::string& path) { return needle::format::Sha256Hex(ReadBytes(path)); }

// `subcommand` empty: the top-level hint.
std::string Hint(const std::string& subcommand) {
  return "Run 'needle" + (subcommand.empty() ? "" : " " + subcommand) +
         " --help' for more information.";
}

// A usage error: exit 2, nothing on stdout, "needle: error: <message>" naming every `names`
// entry, then the hint naming `subcommand`'s --help.
void CheckUsageError(const std::vector<std::string>& args, const std::string& subcommand,
                     const std::vector<std::string>& names) {
  std::string shown;
  for (const auto& a : args) shown += " " + a;
  INFO("needle" << shown);
  const CliResult r = RunCli(args);
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  const std::vector<std::string> lines = Lines(r.err);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].rfind("needle: error: ", 0) == 0);
  for (const std::string& name : names) CHECK(lines[0].find(name) != std::string::npos);
  CHECK(lines[1] == Hint(subcommand));
}

}  // namespace

TEST_CASE("dequant, requant and synth --json describe the files they wrote", "[cli][convert]") {
  const std::string tiny = ModelPath("tiny.cact");
  const auto source = needle::format::CactFile::Open(tiny);
  TempDir dir;

  // dequant: the three files of the folder, and the number of tensors in the safetensors.
  const std::string d = dir / "d";
  json j = RunJson({"dequant", tiny, d, "--json"});
  CHECK(j["model"] == tiny);
  CHECK(j["out_dir"] == d);
  CheckFileRecord(j["files"]["weights"], d + "/weights.safetensors");
  CheckFileRecord(j["files"]["config"], d + "/config.json");
  CheckFileRecord(j["files"]["source"], d + "/source.cact");
  CHECK(j["files"]["source"]["sha256"] == Sha256Of(tiny));
  const auto st = needle::format::SafetensorsFile::Open(d + "/weights.safetensors");
  CHECK(j["tensors"] == st.tensors().size());
  size_t numeric = 0;  // every tensor but the RAW tokenizer blob
  for (const auto& t : source.tensors()) numeric += t.dtype != needle::format::DType::kRaw;
  CHECK(j["tensors"] == numeric);

  // requant without edits: the source file again, every tensor kept.
  const std::string r = dir / "r.cact";
  j = RunJson({"requant", d, r, "--json"});
  CHECK(j["in_dir"] == d);
  CheckFileRecord(j["output"], r);
  CHECK(j["output"]["sha256"] == Sha256Of(tiny));
  CHECK(j["tensors"] == source.tensors().size());
  CHECK(j["kept"] == source.tensors().size());
  CHECK(j["reencoded"] == json::array());

  // requant with one width changed: that tensor re-encoded, a different file.
  const std::string r3 = dir / "r3.cact";
  j = RunJson(
      {"requant", d, r3, "--bits-map", "embedding=4,mhc=4,layer01.q_proj=3,default=2", "--json"});
  CheckFileRecord(j["output"], r3);
  CHECK(j["output"]["sha256"] != Sha256Of(tiny));
  CHECK(j["reencoded"] == json::array({"layer01.q_proj"}));
  CHECK(j["kept"] == source.tensors().size() - 1);
  CHECK(j["tensors"] == needle::format::CactFile::Open(r3).tensors().size());

  // synth: the file, its tensor count, the seed and bits map used.
  const std::string s = dir / "s.cact";
  j = RunJson({"synth",    s,   "--like",         tiny,  "--d-model",      "64",
               "--heads",  "2", "--kv-heads",     "1",   "--head-dim",     "32",
               "--layers", "2", "--engram-sites", "0,1", "--engram-slots", "256",
               "--seed",   "3", "--json"});
  CheckFileRecord(j["output"], s);
  CHECK(j["like"] == tiny);
  CHECK(j["seed"] == 3);
  CHECK(j["bits_map"] == "embedding=4,mhc=4,default=2");
  CHECK(j["heads"] == true);
  const auto synth = needle::format::CactFile::Open(s);
  CHECK(j["tensors"] == synth.tensors().size());
  CHECK(synth.geometry().d_model == 64);
  j = RunJson({"synth", dir / "s2.cact", "--like", tiny, "--d-model", "64", "--heads", "2",
               "--kv-heads", "1", "--head-dim", "32", "--layers", "2", "--no-engram", "--no-heads",
               "--seed", "4", "--json"});
  CheckFileRecord(j["output"], dir / "s2.cact");
  CHECK(j["heads"] == false);
  CHECK(j["tensors"] == needle::format::CactFile::Open(dir / "s2.cact").tensors().size());
  CHECK(j["tensors"] < synth.tensors().size());
}

TEST_CASE("options that would be ignored are refused with exit 2, naming the conflict",
          "[cli][refuse]") {
  const std::string tiny = ModelPath("tiny.cact");
  const std::string golden = DataPath("golden/tiny/golden.json");
  TempDir dir;
  const std::string corpus = dir / "corpus.txt";
  std::ofstream(corpus) << "hello world\n";

  // tokenize --bench prints a throughput report: no TEXT, --json or --batch form.
  CheckUsageError({"tokenize", tiny, "--bench", corpus, "--json"}, "tokenize",
                  {"--bench", "--json"});
  CheckUsageError({"tokenize", tiny, "--bench", corpus, "--batch"}, "tokenize",
                  {"--bench", "--batch"});
  CheckUsageError({"tokenize", tiny, "--bench", corpus, "hello"}, "tokenize", {"--bench", "text"});
  // tokenize --batch prints JSON lines already.
  CheckUsageError({"tokenize", tiny, "--batch", "--json"}, "tokenize", {"--batch", "--json"});

  // run --print-prompt decodes nothing; --raw runs one query without the protocol.
  for (const auto& [option, value] :
       std::vector<std::pair<std::string, std::string>>{{"--raw", ""},
                                                        {"-n", "5"},
                                                        {"--prefix-cache", dir.path()},
                                                        {"--isa", "scalar"},
                                                        {"--trace", ""},
                                                        {"-v", ""}}) {
    std::vector<std::string> args = {"run", tiny, "--print-prompt", option};
    if (!value.empty()) args.push_back(value);
    args.push_back("hi");
    CheckUsageError(args, "run", {"--print-prompt"});
  }
  // ... and -t / --numerics only when it retrieves tools (more than 5; the model runs then).
  CheckUsageError({"run", tiny, "--print-prompt", "-t", "2", "hi"}, "run",
                  {"--print-prompt", "-t/--threads"});
  CheckUsageError({"run", tiny, "--print-prompt", "--numerics", "f32", "hi"}, "run",
                  {"--print-prompt", "--numerics"});
  {
    std::string seven = "[";
    for (int i = 0; i < 7; ++i)
      seven += std::string(i ? "," : "") + R"({"name":"t)" + std::to_string(i) +
               R"(","description":"Tool.","parameters":{}})";
    std::ofstream(dir / "seven.json") << seven + "]";
    const CliResult r = RunCli({"run", tiny, "--tools", dir / "seven.json", "--print-prompt", "-t",
                                "2", "--numerics", "f32", "hi"});
    INFO(r.err);
    CHECK(r.exit_code == 0);
  }
  CheckUsageError({"run", tiny, "--raw", "-v", "hi"}, "run", {"--raw", "--verbose"});
  CheckUsageError({"run", tiny, "--raw", "hi", "there"}, "run", {"--raw takes one query; got 2"});
  CheckUsageError({"run", tiny, "--print-prompt", "hi", "there"}, "run",
                  {"--print-prompt takes one query; got 2"});

  // verify: tolerances without --golden; --max-abs under official numerics.
  for (const std::string option : {"--max-abs", "--near-tie", "--min-cosine"})
    CheckUsageError({"verify", tiny, option, "0.5"}, "verify", {option, "--golden"});
  CheckUsageError({"verify", tiny, "--golden", golden, "--max-abs", "0.5"}, "verify",
                  {"--max-abs", "--numerics f32"});

  // synth --no-engram writes no engram tensor: the engram shape options would be ignored.
  for (const auto& [option, value] :
       std::vector<std::pair<std::string, std::string>>{{"--engram-sites", "0"},
                                                        {"--engram-orders", "2"},
                                                        {"--engram-heads", "2"},
                                                        {"--engram-slots", "64"},
                                                        {"--engram-sub-dim", "16"}}) {
    CheckUsageError({"synth", dir / "x.cact", "--like", tiny, "--no-engram", option, value},
                    "synth", {"--no-engram", option});
  }
  CHECK_FALSE(fs::exists(dir / "x.cact"));

  // The same commands without the conflicting option are accepted.
  CHECK(RunCli({"tokenize", tiny, "--json", "hello"}).exit_code == 0);
  CHECK(RunCli({"run", tiny, "--print-prompt", "hi"}).exit_code == 0);
  CHECK(RunCli({"run", tiny, "--raw", "-n", "2", "hi"}).exit_code == 0);
  CHECK(RunCli({"run", tiny, "-v", "-n", "2", "hi"}).exit_code == 0);
}

TEST_CASE("usage errors end with a hint naming the subcommand's --help", "[cli][usage]") {
  // Every subcommand listed by `needle --help`.
  const CliResult help = RunCli({"--help"});
  REQUIRE(help.exit_code == 0);
  std::vector<std::string> subcommands;
  bool in_list = false;
  for (const std::string& line : Lines(help.out)) {
    if (line.rfind("Subcommands:", 0) == 0) {
      in_list = true;
    } else if (in_list && line.size() > 2 && line[0] == ' ' && line[2] != ' ') {
      subcommands.push_back(line.substr(2, line.find(' ', 2) - 2));
    } else if (in_list && !line.empty() && line[0] != ' ') {
      in_list = false;
    }
  }
  REQUIRE(subcommands.size() >= 10);
  CHECK(std::find(subcommands.begin(), subcommands.end(), "dequant") != subcommands.end());
  for (const std::string& sub : subcommands) {
    CheckUsageError({sub, "--bogus-option"}, sub, {"--bogus-option"});
    CHECK(RunCli({sub, "--help"}).exit_code == 0);
  }

  const std::string tiny = ModelPath("tiny.cact");
  // A bad value names the option and the value (CLI11's check) ...
  CheckUsageError({"run", tiny, "-t", "x", "hi"}, "run", {"--threads", "x"});
  CheckUsageError({"bench", tiny, "-o", "xml"}, "bench", {"--output", "xml"});
  // ... a missing argument, the argument ...
  CheckUsageError({"dequant", tiny}, "dequant", {"out_dir"});
  // ... and the library's own usage errors get the same hint.
  CheckUsageError({"run", tiny, "-n", "-1", "hi"}, "run", {"-n/--max-tokens", "-1"});
  CheckUsageError({"requant", tiny, "x.cact", "--bits-map", "embedding=4"}, "requant",
                  {"embedding=4", "default"});
  // Before a subcommand: the top-level hint.
  CheckUsageError({"frob"}, "", {"'frob' is not a subcommand", "dequant"});
  CheckUsageError({}, "", {"subcommand"});
  CheckUsageError({"--log-level", "loud", "run", tiny, "hi"}, "run", {"loud"});
}

TEST_CASE(
    "json output: --json is one compact document, --jsonl the same content as records + a summary",
    "[cli][json]") {
  const std::string tiny = ModelPath("tiny.cact"), small = ModelPath("small.cact");
  const std::string tools = std::string(NEEDLE_EXAMPLES_DIR) + "/tools.json";
  const std::string golden = std::string(NEEDLE_TEST_DATA) + "/golden/tiny/golden.json";
  // Each command with its list keys (dotted) as --jsonl records them.
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> commands = {
      {{"inspect", tiny, "--tensors"}, {"tensors"}},
      {{"verify", tiny, "--golden", golden},
       {"kernels.tensors", "decode.tensors", "cq_round_trip.tensors", "golden.reference",
        "golden.official"}},
      {{"embed", small, "--tools", tools, "hello", "set a timer"}, {"tools", "texts"}},
      {{"eval", ModelPath("small-crafted-0.5.cact"),
        std::string(NEEDLE_TEST_DATA) + "/eval/small-crafted-0.5.jsonl", "--tools", tools},
       {"tools", "failures"}},
      {{"run", small, "--tools", tools, "--print-prompt", "hi"}, {}},
      {{"run", small, "--raw", "-n", "3", "hi"}, {}},
  };
  for (const auto& [args, lists] : commands) {
    std::string shown;
    for (const auto& a : args) shown += " " + a;
    INFO("needle" << shown);
    std::vector<std::string> with_json = args;
    with_json.push_back("--json");
    const json doc = RunJson(with_json);  // one compact line
    std::vector<std::string> with_jsonl = args;
    with_jsonl.push_back("--jsonl");
    const CliResult r = RunCli(with_jsonl);
    REQUIRE(r.exit_code == 0);
    const std::vector<std::string> lines = Lines(r.out);
    REQUIRE(!lines.empty());
    // Every element of every list is one record line, in order; the summary comes last and holds
    // the rest of the document with each list replaced by its length.
    size_t at = 0;
    json summary_expected = doc;
    for (const std::string& list : lists) {
      json::json_pointer ptr("/" + std::regex_replace(list, std::regex("\\."), "/"));
      if (!doc.contains(ptr)) continue;
      const json& elements = doc.at(ptr);
      REQUIRE(elements.is_array());
      for (const json& e : elements) {
        REQUIRE(at < lines.size());
        json line = json::parse(lines[at++]);
        CHECK(line["record"] == list);
        line.erase("record");
        if (e.is_object()) {
          // Timings differ run to run; everything else is the same content.
          for (const auto& [k, v] : e.items())
            if (k.find("seconds") == std::string::npos) CHECK(line[k] == v);
        } else {
          CHECK(line["value"] == e);
        }
      }
      summary_expected[ptr] = elements.size();
    }
    REQUIRE(at + 1 == lines.size());
    json summary = json::parse(lines[at]);
    CHECK(summary["record"] == "summary");
    summary.erase("record");
    for (const auto& [k, v] : summary_expected.items()) {
      if (v.is_number_float()) continue;  // timings, rates and RSS readings
      if (k == "decode" || k == "kernels" || k == "cq_round_trip" || k == "golden") {
        CHECK(summary[k]["pass"] == v["pass"]);
        continue;
      }
      CHECK(summary[k] == v);
    }
  }
  // The protocol's output is envelopes: one per turn and line (also with --jsonl), or --json's
  // single array of them.
  const std::vector<std::string> run = {"run", small, "--tools", tools, "-n", "6", "hi", "there"};
  std::vector<std::string> with = run;
  with.push_back("--json");
  // (Not RunJson: the envelopes keep the engine's number formats, e.g. "0.2570", which a
  // re-serialization would not reproduce.)
  const CliResult one = RunCli(with);
  REQUIRE(one.exit_code == 0);
  REQUIRE(Lines(one.out).size() == 1);
  const json turns = json::parse(one.out);
  REQUIRE(turns.is_array());
  CHECK(turns.size() == 2);
  CHECK(turns[0].contains("confidence"));
  with.back() = "--jsonl";
  CHECK(Lines(RunCli(with).out).size() == 2);
  // --json and --jsonl together are refused.
  with.push_back("--json");
  CheckUsageError(with, "run", {"--json", "--jsonl"});
}
