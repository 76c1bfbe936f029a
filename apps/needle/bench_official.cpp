// Official-engine rows for `needle bench`: a small node program (written to a temporary folder)
// drives the package's needle.js / needle.wasm through needle_load / needle_init /
// needle_complete and prints one JSON line per measured turn.
#include "bench_official.h"

#include <fmt/format.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "format/atomic_file.h"

namespace needle::cli {

namespace {

constexpr const char* kScript = R"JS(
const fs = require("node:fs");
const path = require("node:path");
const [pkg, model, queryFile, reps, warmup, maxTokens, toolsFile, systemFile] = process.argv.slice(2);
const capacity = 1 << 20;
// A fresh module instance with the model loaded; `load`: seconds for reading the file into the
// module's memory and needle_load.
async function engine() {
  const dir = path.join(path.resolve(pkg), "vendor", "wasm");
  const M = await require(path.join(dir, "needle.js"))({ locateFile: (f) => path.join(dir, f) });
  const e = { M, out: M._malloc(capacity),
    init: M.cwrap("needle_init", "number", ["string", "string", "string"]),
    complete: M.cwrap("needle_complete", "number", ["string", "number", "number", "number"]),
    reset: M.cwrap("needle_reset", null, []) };
  const t0 = performance.now();
  const bytes = fs.readFileSync(model);
  const ptr = M._malloc(bytes.length);
  M.HEAPU8.set(bytes, ptr);
  let rc;
  try { rc = M._needle_load(ptr, bytes.length); }
  catch (err) { if (!(err instanceof TypeError)) throw err; rc = M._needle_load(ptr, BigInt(bytes.length)); }
  if (rc < 0) { console.error(`needle_load returned ${rc}`); process.exit(4); }
  e.load = (performance.now() - t0) / 1000;
  return e;
}
(async () => {
  const query = fs.readFileSync(queryFile, "utf8");
  if (toolsFile) {
    // The session scenario, each repetition in a fresh instance (the engine keeps the last
    // prefix in memory: a second needle_init with the same tools skips the prefill, timed as
    // init_cached): needle_init, one needle_complete, needle_init again. The return values are
    // the prefix's and the reply's token counts.
    const tools = fs.readFileSync(toolsFile, "utf8"), system = fs.readFileSync(systemFile, "utf8");
    for (let i = -Number(warmup); i < Number(reps); i++) {
      const e = await engine();
      const t0 = performance.now();
      const prefix = e.init(system, tools, "");
      if (prefix < 0) { console.error(`needle_init returned ${prefix}`); process.exit(4); }
      const t1 = performance.now();
      const tokens = e.complete(query, Number(maxTokens), e.out, capacity);
      const t2 = performance.now();
      if (tokens < 0) { console.error(`needle_complete returned ${tokens}`); process.exit(4); }
      const reply = JSON.parse(e.M.UTF8ToString(e.out));
      const t3 = performance.now();
      if (e.init(system, tools, "") !== prefix) { console.error("needle_init differed"); process.exit(4); }
      const t4 = performance.now();
      if (i >= 0) console.log(JSON.stringify({ load: e.load, init: (t1 - t0) / 1000,
        reply: (t2 - t1) / 1000, init_cached: (t4 - t3) / 1000, prefix, tokens, type: reply.type }));
    }
    return;
  }
  // Kept alive: the official module reads the model in place from the buffer given to needle_load.
  const e = await engine();
  console.log(JSON.stringify({ load: e.load }));
  // One tool: with none the engine reports decode_tps 0.
  const tools = JSON.stringify([{ name: "note", description: "Write a note.", parameters: {
    type: "object", properties: { text: { type: "string" } }, required: ["text"] } }]);
  for (let i = -Number(warmup); i < Number(reps); i++) {
    const t0 = performance.now();
    if (e.init("", tools, "") < 0) { console.error("needle_init failed"); process.exit(4); }
    e.reset();
    e.complete(query, Number(maxTokens), e.out, capacity);
    const wall = (performance.now() - t0) / 1000;
    const reply = JSON.parse(e.M.UTF8ToString(e.out));
    if (i >= 0) console.log(JSON.stringify({ prefill_tps: reply.prefill_tps, decode_tps: reply.decode_tps, wall }));
  }
})().catch((err) => { console.error(String(err)); process.exit(70); });
)JS";

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool OnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::string p = path;
  size_t start = 0;
  while (start <= p.size()) {
    const size_t colon = p.find(':', start);
    const std::string dir = p.substr(start, colon == std::string::npos ? colon : colon - start);
    if (!dir.empty() && ::access((std::filesystem::path(dir) / program).c_str(), X_OK) == 0)
      return true;
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return false;
}

void WriteText(const std::filesystem::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
  if (!f) Fail<IoError>("{}: cannot write", p.string());
}

// The fields every official-engine record shares: the engine, the model, its WASM build, one
// thread.
template <class Record>
void FillOfficial(Record* r, const std::string& model_path, const std::string& model_sha256,
                  uint64_t model_bytes, int repetitions) {
  r->engine = "official";
  r->model = model_path;
  r->model_sha256 = model_sha256;
  r->model_bytes = model_bytes;
  r->isa = "wasm";
  r->path = "official";
  r->threads = 1;
  r->repetitions = repetitions;
}

}  // namespace

OfficialBench::OfficialBench(std::string pkg_dir) : pkg_dir_(std::move(pkg_dir)) {
  if (!OnPath("node"))
    Fail<UsageError>("--official needs node on PATH (Debian: apt-get install nodejs)");
  for (const char* f : {"needle.js", "needle.wasm"}) {
    const auto p = std::filesystem::path(pkg_dir_) / "vendor" / "wasm" / f;
    if (!std::filesystem::is_regular_file(p))
      Fail<UsageError>(
          "--official {}: no {} (give the npm package folder, e.g. "
          "node_modules/@tyler71/cactus-needle2)",
          pkg_dir_, p.string());
  }
}

// Runs the script with these arguments (a text argument is written to a file in the script's
// folder and passed by path); returns its stdout's non-empty lines, each a JSON object.
std::vector<nlohmann::json> OfficialBench::RunScript(const std::vector<ScriptArg>& args) const {
  const format::TempDir dir("needle-official");
  WriteText(dir.path() / "bench.cjs", kScript);
  std::string cmd = fmt::format("node {} {}", ShellQuote((dir.path() / "bench.cjs").string()),
                                ShellQuote(pkg_dir_));
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i].value;
    if (args[i].as_file) {
      const auto file = dir.path() / fmt::format("arg{}.txt", i);
      WriteText(file, arg);
      arg = file.string();
    }
    cmd += " " + ShellQuote(arg);
  }
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) Fail<IoError>("cannot start node for the official engine");
  std::string output;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) output.append(buf, n);
  const int status = ::pclose(pipe);
  if (status != 0)
    Fail<IoError>(
        "the official engine (node, {}) failed on {} (exit status {}); its message is "
        "above",
        pkg_dir_, args.empty() ? std::string() : args[0].value,
        WIFEXITED(status) ? WEXITSTATUS(status) : status);
  std::vector<nlohmann::json> lines;
  size_t start = 0;
  while (start < output.size()) {
    size_t end = output.find('\n', start);
    if (end == std::string::npos) end = output.size();
    const std::string line = output.substr(start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      Fail<IoError>("the official engine printed an unexpected line: {}", line);
    lines.push_back(std::move(j));
  }
  return lines;
}

report::BenchRecord OfficialBench::Run(const std::string& model_path,
                                       const std::string& model_sha256, uint64_t model_bytes,
                                       const std::string& query, int prompt_tokens, int gen_tokens,
                                       int repetitions, int warmup) const {
  const std::vector<nlohmann::json> lines = RunScript({{model_path},
                                                       {query, true},
                                                       {std::to_string(repetitions)},
                                                       {std::to_string(warmup)},
                                                       {std::to_string(gen_tokens)}});
  report::BenchRecord r;
  FillOfficial(&r, model_path, model_sha256, model_bytes, repetitions);
  r.prompt_tokens = prompt_tokens;
  r.gen_tokens = gen_tokens;
  r.chunk = 32;
  for (const nlohmann::json& j : lines) {
    if (j.contains("load")) {
      r.load_seconds = j.value("load", 0.0);
      continue;
    }
    r.prefill_tok_s.push_back(j.value("prefill_tps", 0.0));
    // A turn that ended at its first token decoded nothing: no decode rate to report.
    const double decode = j.value("decode_tps", 0.0);
    if (gen_tokens > 0 && decode > 0) r.decode_tok_s.push_back(decode);
    r.total_s.push_back(j.value("wall", 0.0));
  }
  if (r.prefill_tok_s.size() != static_cast<size_t>(repetitions))
    Fail<IoError>("the official engine gave {} measurements, expected {}", r.prefill_tok_s.size(),
                  repetitions);
  return r;
}

report::SessionBenchRecord OfficialBench::RunSession(
    const std::string& model_path, const std::string& model_sha256, uint64_t model_bytes,
    const std::string& tools_json, const std::string& system, const std::string& query, int budget,
    int repetitions, int warmup) const {
  const std::vector<nlohmann::json> lines = RunScript({{model_path},
                                                       {query, true},
                                                       {std::to_string(repetitions)},
                                                       {std::to_string(warmup)},
                                                       {std::to_string(budget)},
                                                       {tools_json, true},
                                                       {system, true}});
  report::SessionBenchRecord r;
  FillOfficial(&r, model_path, model_sha256, model_bytes, repetitions);
  r.budget = budget;
  r.query = query;
  r.turn_tokens = -1;  // not reported by the engine
  for (const nlohmann::json& j : lines) {
    r.load_s.push_back(j.value("load", 0.0));
    r.init_s.push_back(j.value("init", 0.0));
    r.init_cached_s.push_back(j.value("init_cached", 0.0));
    r.reply_s.push_back(j.value("reply", 0.0));
    r.prefix_tokens = j.value("prefix", 0);
    r.reply_tokens = j.value("tokens", 0);
    r.reply_type = j.value("type", std::string());
  }
  if (r.init_s.size() != static_cast<size_t>(repetitions))
    Fail<IoError>("the official engine gave {} measurements, expected {}", r.init_s.size(),
                  repetitions);
  return r;
}

}  // namespace needle::cli
