// The global options (--version, --log-level, NEEDLE_LOG_LEVEL, --quiet) and bench's models list,
// streamed rows and output formats (a real Markdown table, SQL a database accepts).
#include <stdlib.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "format/cact.h"
#include "format/sha256.h"
#include "kernels/dispatch.h"
#include "test_util.h"

using namespace needle::testing;
using nlohmann::json;

namespace {

// `needle` with an environment variable set.
CliResult RunWithEnv(const std::string& assignment, std::vector<std::string> args) {
  args.insert(args.begin(), {assignment, NEEDLE_BINARY});
  return RunProgram("/usr/bin/env", args);
}

std::string FileSha256(const std::string& path) {
  const auto b = ReadBytes(path);
  return needle::format::Sha256Hex(b);
}

}  // namespace

TEST_CASE("needle --version names the version, a commit of this repository, compiler and ISAs",
          "[cli][version]") {
  const CliResult r = RunCli({"--version"});
  REQUIRE(r.exit_code == 0);
  const std::vector<std::string> lines = Lines(r.out);
  REQUIRE(lines.size() == 6);
  CHECK(lines[0] == std::string("needle ") + NEEDLE_VERSION);
  std::smatch m;
  REQUIRE(std::regex_match(lines[1], m, std::regex("commit +(\\S+)")));
  const std::string named = m[1];
  if (named != "unknown") {
    // A commit this checkout knows (the checkout's at build time: not necessarily today's HEAD),
    // "-dirty" when tracked files differed from it.
    std::smatch c;
    REQUIRE(std::regex_match(named, c, std::regex("([0-9a-f]{12})(-dirty)?")));
    const std::string commit = c[1];
    const std::string cmd = "git -C '" + std::string(NEEDLE_TEST_DATA) + "' cat-file -e '" +
                            commit + "^{commit}' 2>/dev/null";
    CHECK(std::system(cmd.c_str()) == 0);
  }
  CHECK(std::regex_match(lines[2], std::regex("compiler +(GCC|Clang) .+")));
  CHECK(std::regex_match(lines[3], std::regex("build +\\S+")));
  std::string compiled, usable;
  for (const auto& isa : needle::kernels::CompiledIsas())
    compiled += (compiled.empty() ? "" : " ") + isa;
  for (const auto& isa : needle::kernels::AvailableIsas())
    usable += (usable.empty() ? "" : " ") + isa;
  CHECK(lines[4] == "isas      compiled: " + compiled);
  CHECK(lines[5].rfind("          usable here: " + usable, 0) == 0);
  // Every usable ISA is compiled in.
  for (const auto& isa : needle::kernels::AvailableIsas())
    CHECK(std::find(needle::kernels::CompiledIsas().begin(), needle::kernels::CompiledIsas().end(),
                    isa) != needle::kernels::CompiledIsas().end());
}

TEST_CASE("log level: --log-level, NEEDLE_LOG_LEVEL and --quiet decide what reaches stderr",
          "[cli][log]") {
  const std::string model = ModelPath("tiny.cact");
  const std::vector<std::string> raw = {"run", model, "--raw", "-n", "2", "hi"};
  auto with = [&](std::vector<std::string> front) {
    front.insert(front.end(), raw.begin(), raw.end());
    return front;
  };
  // run --raw logs its timing line at info: shown by default ...
  CliResult r = RunCli(raw);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.rfind("needle: info: 2 tokens generated", 0) == 0);
  const std::string out = r.out;
  // ... hidden by --quiet, --log-level warning (before or after the subcommand) and the variable.
  for (const CliResult& quiet :
       {RunCli(with({"--quiet"})), RunCli(with({"--log-level", "warning"})),
        RunCli({"run", model, "--raw", "-n", "2", "hi", "--log-level", "error"}),
        RunWithEnv("NEEDLE_LOG_LEVEL=error", raw)}) {
    CHECK(quiet.exit_code == 0);
    CHECK(quiet.err.empty());
    CHECK(quiet.out == out);  // results are not logs
  }
  // The option wins over the variable.
  r = RunWithEnv("NEEDLE_LOG_LEVEL=off", with({"--log-level", "info"}));
  CHECK(r.err.find("needle: info: ") != std::string::npos);
  // Unknown levels are usage errors naming where they came from.
  r = RunCli(with({"--log-level", "loud"}));
  CHECK(r.exit_code == 2);
  r = RunWithEnv("NEEDLE_LOG_LEVEL=loud", raw);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("NEEDLE_LOG_LEVEL") != std::string::npos);
  CHECK(r.err.find("loud") != std::string::npos);
  // Conflicts are refused: --quiet with --log-level, --quiet with -v / --trace.
  CHECK(RunCli(with({"--quiet", "--log-level", "info"})).exit_code == 2);
  r = RunCli({"--quiet", "run", model, "-n", "2", "-v", "hi"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("-v/--verbose") != std::string::npos);
  // -v lines are debug log lines carrying JSON.
  r = RunCli({"run", model, "-n", "2", "-v", "hi"});
  REQUIRE(r.exit_code == 0);
  const std::string prefix = "needle: debug: ";
  REQUIRE(r.err.rfind(prefix, 0) == 0);
  CHECK(json::parse(Lines(r.err).front().substr(prefix.size())).contains("generated_ids"));
}

TEST_CASE("bench: several models, a Markdown table, SQL a database loads, one row per point",
          "[cli][bench]") {
  const std::string tiny = ModelPath("tiny.cact"), small = ModelPath("small.cact");
  const std::vector<std::string> common = {"-p", "8",        "-n", "2",  "-r",
                                           "1",  "--warmup", "0",  "-t", "1,2"};
  auto bench = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "bench");
    args.insert(args.end(), common.begin(), common.end());
    return RunCli(args);
  };
  const size_t points = 2 /*models*/ * 2 /*threads*/;

  // Markdown: a header row, the alignment row, one row per point, same column count everywhere.
  CliResult r = bench({tiny, "-m", small});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::vector<std::string> rows;
  for (const std::string& line : Lines(r.out))
    if (!line.empty() && line.front() == '|') rows.push_back(line);
  REQUIRE(rows.size() == 2 + points);
  auto pipes = [](const std::string& s) {
    size_t n = 0;
    for (size_t i = 0; i < s.size(); ++i) n += s[i] == '|' && (i == 0 || s[i - 1] != '\\');
    return n;
  };
  for (const std::string& row : rows) CHECK(pipes(row) == pipes(rows[0]));
  CHECK(rows[0].rfind("| engine | model | isa |", 0) == 0);
  CHECK(std::regex_match(rows[1], std::regex("\\|( -{3,}:? \\|)+")));
  CHECK(rows[2].rfind("| needle | " + tiny + " |", 0) == 0);
  CHECK(rows[2 + points - 1].rfind("| needle | " + small + " |", 0) == 0);

  // jsonl: one record per point, in the cross product's order, with each file's own hash.
  r = bench({"-m", tiny + "," + small, "-o", "jsonl"});
  REQUIRE(r.exit_code == 0);
  const std::vector<std::string> records = Lines(r.out);
  REQUIRE(records.size() == points);
  for (size_t i = 0; i < points; ++i) {
    const json j = json::parse(records[i]);
    const std::string path = i < 2 ? tiny : small;
    CHECK(j["model"] == path);
    CHECK(j["model_sha256"] == FileSha256(path));
    CHECK(j["threads"] == (i % 2 ? 2 : 1));
  }
  // json: one document holding every record.
  r = bench({"-m", tiny + "," + small, "-o", "json"});
  REQUIRE(r.exit_code == 0);
  CHECK(json::parse(r.out)["records"].size() == points);

  // sql: CREATE TABLE + one INSERT per point, loaded by sqlite (python3's sqlite3 module).
  TempDir dir;
  r = bench({tiny, small, "-o", "sql"});
  REQUIRE(r.exit_code == 0);
  std::ofstream(dir / "bench.sql") << r.out;
  const std::string script =
      "import sqlite3,sys\n"
      "c=sqlite3.connect(':memory:')\n"
      "c.executescript(open(sys.argv[1]).read())\n"
      "for row in c.execute('SELECT model, model_sha256, threads, prompt_tokens FROM "
      "needle_bench'): print('\\t'.join(map(str,row)))\n";
  std::ofstream(dir / "load.py") << script;
  const CliResult loaded = RunProgram("/usr/bin/python3", {dir / "load.py", dir / "bench.sql"});
  INFO(loaded.err);
  REQUIRE(loaded.exit_code == 0);
  const std::vector<std::string> db_rows = Lines(loaded.out);
  REQUIRE(db_rows.size() == points);
  CHECK(db_rows[0] == tiny + "\t" + FileSha256(tiny) + "\t1\t8");
  CHECK(db_rows[3] == small + "\t" + FileSha256(small) + "\t2\t8");

  // Rows are written as their points finish: when the second model cannot be opened, the first
  // one's rows are already out (and the error names the file).
  r = bench({"-m", tiny + "," + dir / "missing.cact", "-o", "jsonl"});
  CHECK(r.exit_code == 3);
  CHECK(r.err.find("missing.cact") != std::string::npos);
  const std::vector<std::string> streamed = Lines(r.out);
  REQUIRE(streamed.size() == 2);
  CHECK(json::parse(streamed[1])["model"] == tiny);

  // Usage: no model, -o with --json, an unknown format.
  CHECK(bench({}).exit_code == 2);
  CHECK(bench({tiny, "-o", "csv", "--json"}).exit_code == 2);
  CHECK(bench({tiny, "-o", "xml"}).exit_code == 2);
}

TEST_CASE("bench: chunk sizes, first-token and pg times, an SVG plot, refused combinations",
          "[cli][bench]") {
  const std::string tiny = ModelPath("tiny.cact");
  TempDir dir;
  const std::string svg = dir / "plot.svg";
  CliResult r =
      RunCli({"bench", tiny, "--numerics", "f32", "--chunk", "4,32", "-p", "8,16",  "-n",    "3",
              "-r",    "2",  "--warmup",   "0",   "-t",      "1",    "-o", "jsonl", "--svg", svg});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<std::string> lines = Lines(r.out);
  REQUIRE(lines.size() == 4);  // 2 chunks x 2 prompt lengths
  for (size_t i = 0; i < lines.size(); ++i) {
    const json j = json::parse(lines[i]);
    CHECK(j["chunk"] == (i < 2 ? 4 : 32));
    CHECK(j["engine"] == "needle");
    // The first token comes after tokenizing and the prefill, before the whole request ends.
    CHECK(j["first_token_ms"].get<double>() > 0);
    CHECK(j["first_token_ms"].get<double>() <= j["total_ms"].get<double>());
    CHECK(j["tokenize_ms"].get<double>() <= j["first_token_ms"].get<double>());
    CHECK(j["pg_tok_s"].get<double>() > 0);
    CHECK(j["first_token_ms_samples"].size() == 2);
    CHECK(j["system"]["commit"].get<std::string>().size() > 0);
  }
  // The plot: x = prompt tokens (2 values, as chunk: the first such axis wins), one point
  // per record in each of the two panels.
  const auto bytes = ReadBytes(svg);
  const std::string text(bytes.begin(), bytes.end());
  REQUIRE(text.rfind("<svg", 0) == 0);
  size_t circles = 0;
  for (size_t at = text.find("<circle"); at != std::string::npos; at = text.find("<circle", at + 1))
    ++circles;
  CHECK(circles == 2 * lines.size());
  // The official path prefills in 32-token calls: another chunk is refused, naming the option.
  r = RunCli({"bench", tiny, "--chunk", "8", "-p", "8", "-n", "1", "-r", "1"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--chunk") != std::string::npos);
  // --official needs the npm package folder: a wrong one is a usage error naming the file.
  r = RunCli({"bench", tiny, "--official", dir / "nothing", "-p", "8", "-n", "1", "-r", "1"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("vendor/wasm/needle.js") != std::string::npos);
}

TEST_CASE("bench --session: load, init computed and from a snapshot, a reply like run's",
          "[cli][bench]") {
  const std::string demo = ExamplePath("demo.cact"), tools = ExamplePath("demo-tools.json");
  const std::vector<std::string> queries = {"What is the weather like in Paris today?",
                                            "Set a timer for 5 minutes"};
  CliResult r = RunCli({"bench", demo, "--session", tools, "--query", queries[0], "--query",
                        queries[1], "-n", "64", "-r", "3", "--warmup", "0", "-t", "1", "--json"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json doc = json::parse(r.out);
  REQUIRE(doc["records"].size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    const json& rec = doc["records"][i];
    CHECK(rec["scenario"] == "session");
    CHECK(rec["query"] == queries[i]);
    CHECK(rec["budget"] == 64);
    for (const char* name : {"load", "init", "init_cached", "reply"}) {
      CHECK(rec[std::string(name) + "_ms_samples"].size() == 3);
      CHECK(rec[std::string(name) + "_ms"].get<double>() > 0);
    }
    // The same turn as `needle run` answers: its report counts the prefix and the turn as the
    // first turn's prompt, and its envelope has the same type.
    TempDir dir;
    const std::string report = dir / "run.json";
    const CliResult run = RunCli(
        {"run", demo, "--tools", tools, "-n", "64", "-t", "1", "--report", report, queries[i]});
    REQUIRE(run.exit_code == 0);
    const json envelope = json::parse(run.out);
    const auto report_bytes = ReadBytes(report);
    const json run_record =
        json::parse(std::string(report_bytes.begin(), report_bytes.end()))["records"][0];
    CHECK(rec["prefix_tokens"].get<int>() + rec["turn_tokens"].get<int>() ==
          run_record["prompt_tokens"].get<int>());
    CHECK(rec["reply_type"] == envelope["type"]);
    CHECK(rec["reply_tokens"].get<int>() > 0);
    CHECK(rec["reply_tokens"].get<int>() <= 64);
  }
  CHECK(doc["records"][0]["reply_type"] == "call");
  // Options of the token benchmark that do not apply are refused; --query needs --session; a bad
  // tools file is named.
  CHECK(RunCli({"bench", demo, "--session", tools, "-p", "8"}).exit_code == 2);
  // --official works with --session (scripts/test-wasm.sh runs it): a wrong package folder is
  // named before anything runs.
  r = RunCli({"bench", demo, "--session", tools, "--official", "x"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("x/vendor/wasm/needle.js") != std::string::npos);
  CHECK(RunCli({"bench", demo, "--query", "hi"}).exit_code == 2);
  r = RunCli({"bench", demo, "--session", "/nonexistent/tools.json", "-r", "1"});
  CHECK(r.exit_code == 3);
  CHECK(r.err.find("/nonexistent/tools.json") != std::string::npos);
  r = RunCli({"bench", demo, "--session", tools, "-n", "4096", "-r", "1"});  // demo: 2,048
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("max_seq_len") != std::string::npos);
}

TEST_CASE("run: NEEDLE_PREFIX_CACHE is the default prefix cache, an unwritable one only warns",
          "[cli][cache]") {
  const std::string demo = ExamplePath("demo.cact"), tools = ExamplePath("demo-tools.json");
  const std::string query = "Set a timer for 5 minutes";
  TempDir dir;
  const CliResult plain = RunCli({"run", demo, "--tools", tools, query});
  REQUIRE(plain.exit_code == 0);
  auto prompt_tokens = [](const std::string& report) {
    const auto bytes = ReadBytes(report);
    return json::parse(std::string(bytes.begin(), bytes.end()))["records"][0]["prompt_tokens"]
        .get<int>();
  };
  const std::string cache = dir / "cache";
  REQUIRE(::setenv("NEEDLE_PREFIX_CACHE", cache.c_str(), 1) == 0);
  const CliResult first =
      RunCli({"run", demo, "--tools", tools, "--report", dir / "1.json", query});
  const CliResult second =
      RunCli({"run", demo, "--tools", tools, "--report", dir / "2.json", query});
  // --print-prompt decodes nothing: the variable does not count as a conflicting option there.
  const CliResult prompt = RunCli({"run", demo, "--tools", tools, "--print-prompt", query});
  ::unsetenv("NEEDLE_PREFIX_CACHE");
  REQUIRE(first.exit_code == 0);
  REQUIRE(second.exit_code == 0);
  CHECK(prompt.exit_code == 0);
  // The envelopes up to their timings (prefill_tps, decode_tps, peak_ram_mb vary by run).
  auto reply = [](const std::string& envelope) {
    return envelope.substr(0, envelope.find(",\"prefill_tps\":"));
  };
  REQUIRE(reply(plain.out).find("\"confidence\":") != std::string::npos);
  CHECK(reply(first.out) == reply(plain.out));
  CHECK(reply(second.out) == reply(plain.out));
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(cache))
    files += e.path().extension() == ".prefix";
  CHECK(files == 1);
  // The first run prefilled the prefix and the turn; the second only the turn.
  CHECK(prompt_tokens(dir / "2.json") < prompt_tokens(dir / "1.json"));
  // A folder that cannot be created: the same reply, exit 0, a warning naming it.
  const CliResult unwritable =
      RunCli({"run", demo, "--tools", tools, "--prefix-cache", "/proc/no-such-dir/x", query});
  CHECK(unwritable.exit_code == 0);
  CHECK(reply(unwritable.out) == reply(plain.out));
  CHECK(unwritable.err.find("/proc/no-such-dir/x") != std::string::npos);
}

TEST_CASE("bench Markdown escapes pipes in cells", "[report][bench]") {
  // A model path with a pipe must not add a column.
  TempDir dir;
  const std::string odd = dir / "a|b.cact";
  const auto b = ReadBytes(ModelPath("tiny.cact"));
  WriteBytes(odd, b);
  const CliResult r =
      RunCli({"bench", odd, "-p", "4", "-n", "1", "-r", "1", "--warmup", "0", "-t", "1"});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("a\\|b.cact") != std::string::npos);
}
