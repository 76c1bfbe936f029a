// needle run: queries against a model with a tool list, answered with the engine's protocol
// (grammar-constrained calls, PROTOCOL.md sections 2-5); prints the reply envelope JSON per turn.
// Several queries form one conversation (a query after a turn with calls is a tool result).
// --raw decodes without the protocol (plain greedy) and prints the generated text.
// --batch answers independent JSONL requests on one loaded model (session::SessionPool).
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/utf8.h"
#include "commands.h"
#include "format/atomic_file.h"
#include "format/cact.h"
#include "format/mapped_file.h"
#include "format/sha256.h"
#include "grammar/schema.h"
#include "kernels/dispatch.h"
#include "options.h"
#include "report/bench_record.h"
#include "report/log.h"
#include "report/system.h"
#include "report/timer.h"
#include "session/pool.h"
#include "session/request.h"
#include "session/session.h"
#include "text/json_text.h"
#include "text/prompt.h"
#include "text/tokenizer.h"
#include "version.h"

namespace needle::cli {

namespace {

struct RunArgs {
  ModelArgs model;
  OutputArgs output;
  ThreadArgs threads;
  NumericsArgs numerics;
  SchemaArgs schema;
  std::string tools_path;
  std::string prefix_cache;
  std::string system;
  std::vector<std::string> queries;
  std::string query_file;  // -f: the first query's text
  std::string batch_path;  // --batch: JSONL requests
  std::string isa;
  std::string report_path;  // --report: bench records of the turns answered
  int64_t kv_window = -1;   // --kv-window (-1: not given = the header's)
  bool interactive = false;
  int64_t max_tokens = 256;  // checked: 0 <= max_tokens <= the model's max_seq_len
  bool print_prompt = false;
  bool raw = false;
  bool verbose = false;
  bool trace = false;
  // Given on the command line (not defaults): --print-prompt uses them only to retrieve tools.
  bool threads_given = false, numerics_given = false;
};

// Checks the tools text (JSON, tool objects, string names, the schema keywords the grammar
// enforces) before the model is loaded; errors name the tools file.
void ValidateTools(const std::string& tools_json, const std::string& path) {
  const std::string label = (path == "-" ? std::string("<stdin>") : path) + ": tools";
  try {
    const std::string tools_text = text::RenderToolsText(tools_json, label);
    (void)grammar::BuildCallSchema(text::ToolInventory(tools_text, label));
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.rfind(label, 0) == 0) throw;
    throw Error(e.kind(), label + ": " + what);
  }
}

std::string IdsJoined(const std::vector<int32_t>& ids) {
  return fmt::format("{}", fmt::join(ids, " "));
}

void PrintPrompt(const format::CactFile& file, const RunArgs& a, const std::string& tools_json) {
  const text::Tokenizer tok = text::Tokenizer::FromCact(file);
  const text::PromptRenderer renderer(tok);
  std::string tools_text = text::RenderToolsText(tools_json);
  const bool retrieves = !tools_text.empty() &&
                         text::ToolInventory(tools_text, "tools").size() > text::kMaxRenderedTools;
  if (!retrieves && (a.threads_given || a.numerics_given))
    Fail<UsageError>(
        "--print-prompt runs the model only to retrieve tools (more than {} tools), so {} would "
        "be ignored",
        text::kMaxRenderedTools, a.threads_given ? "-t/--threads" : "--numerics");
  if (retrieves) {
    // Retrieval: the prompt shows the tools the first query retrieves (a model run).
    session::SessionConfig cfg;
    cfg.threads = a.threads.Resolve();
    cfg.numerics = model::ParseNumericPath(a.numerics.numerics);
    session::Session s(file, cfg, a.system, tools_json);
    tools_text = s.ToolsTextFor(a.queries.front());
  }
  const auto prefix = renderer.PrefixIds(a.system, tools_text);
  const auto turn = renderer.FirstTurnIds(a.queries.front());
  const std::string prefix_text = text::PrefixText(a.system, tools_text);
  const std::string turn_text = text::FirstTurnText(a.queries.front());
  if (a.output.machine()) {
    // JSON strings hold Unicode text only: name the first byte that is not UTF-8 instead of
    // failing inside the serializer (the token ids would be well defined: U+FFFD per byte).
    const std::pair<const char*, std::string_view> texts[] = {
        {"query", a.queries.front()}, {"system text", a.system}, {"tools text", tools_text}};
    for (const auto& [what, text] : texts) {
      const size_t bad = FirstInvalidUtf8(text);
      if (bad != std::string_view::npos)
        Fail<InvalidInput>(
            "the {} is not valid UTF-8 (byte {} = 0x{:02X}); --print-prompt --json needs UTF-8 "
            "text (without --json the prompt is printed as it is)",
            what, bad, static_cast<uint8_t>(text[bad]));
    }
    nlohmann::ordered_json j;
    j["tools_text"] = tools_text;
    j["prefix_text"] = prefix_text;
    j["turn_text"] = turn_text;
    j["prefix_ids"] = prefix;
    j["turn_ids"] = turn;
    a.output.Emit(j, {});
    return;
  }
  fmt::print(
      "prefix ({} tokens, KV sinks):\n<s>{}\n\nturn ({} tokens):\n{}\n\nprefix ids: {}\n"
      "turn ids: {}\n",
      prefix.size(), prefix_text, turn.size(), turn_text, IdsJoined(prefix), IdsJoined(turn));
}

// -f FILE: the query is the file's text without its final line break (LF or CRLF).
std::string ReadQueryFile(const std::string& path) {
  std::string q = ReadTextInput(path);
  if (!q.empty() && q.back() == '\n') {
    q.pop_back();
    if (!q.empty() && q.back() == '\r') q.pop_back();
  }
  return q;
}

// -v: the turn's ids, texts, budget use and confidences, one debug log line.
void LogVerbose(const session::Reply& reply, const session::Session& s, double load_seconds,
                bool prefix_reused) {
  nlohmann::ordered_json j;
  j["turn_ids"] = reply.turn.turn_ids;
  j["generated_ids"] = reply.turn.generated_ids;
  j["text"] = reply.turn.text;
  j["calls"] = reply.calls_text;
  j["think"] = reply.think_text;
  j["counted_tokens"] = reply.counted_tokens;
  j["stop"] = session::StopReasonName(reply.turn.stop);
  j["head_confidence"] = reply.head_confidence;
  j["head_rescored"] = reply.head_rescored;
  j["decode_confidence"] = reply.decode_confidence;
  j["load_seconds"] = load_seconds;
  j["prefix_seconds"] = s.prefix_seconds();
  j["prefix_from_cache"] = s.prefix_from_cache();
  j["prefix_reused"] = prefix_reused;
  report::Log(report::LogSeverity::kDebug, "{}",
              j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

// --report FILE.json: one bench record per answered turn (a real request: its prompt and
// generated tokens, prefill, first token and decode times, the process's peak RSS), written as
// `bench -o json` writes them, atomically, when the run ends.
class TurnReport {
 public:
  TurnReport(const RunArgs& a, const format::CactFile& file, const session::SessionConfig& cfg,
             double load_seconds)
      : path_(a.report_path), model_(a.model.path), load_seconds_(load_seconds), cfg_(cfg) {
    if (path_.empty()) return;
    sha_ = file.Sha256Hex();
    bytes_ = file.bytes().size();
  }
  // A turn: `context_tokens` fed before generating (prefix included when it was prefilled for
  // this turn), `prefill_seconds` for them, then the decode.
  void Add(size_t context_tokens, const session::TurnResult& t, double prefill_seconds) {
    if (path_.empty()) return;
    report::BenchRecord r;
    r.model = model_;
    r.model_sha256 = sha_;
    r.model_bytes = bytes_;
    r.isa = (cfg_.kernels ? *cfg_.kernels : kernels::ActiveKernels()).isa;
    r.path = model::NumericPathName(cfg_.numerics);
    r.threads = cfg_.threads;
    r.prompt_tokens = static_cast<int>(context_tokens);
    r.gen_tokens = static_cast<int>(t.generated_ids.size());
    r.chunk = 32;
    r.repetitions = 1;
    r.load_seconds = load_seconds_;
    r.prefill_tok_s.push_back(context_tokens / std::max(prefill_seconds, 1e-9));
    if (!t.generated_ids.empty()) r.decode_tok_s.push_back(t.decode_tps);
    // The first token is chosen from the prefill's last logits.
    r.first_token_s.push_back(prefill_seconds);
    r.total_s.push_back(prefill_seconds + t.decode_seconds);
    r.peak_rss_bytes = report::PeakRssBytes();
    records_.push_back(std::move(r));
  }
  void Write() const {
    if (path_.empty()) return;
    report::SystemInfo sys = report::GetSystemInfo();
    sys.isas = kernels::AvailableIsas();
    sys.commit = GitCommit();
    sys.build_type = BuildType();
    const std::string text = report::Render(records_, sys, report::BenchFormat::kJson);
    format::WriteFileAtomic(path_, {reinterpret_cast<const uint8_t*>(text.data()), text.size()});
  }

 private:
  std::string path_, model_, sha_;
  uint64_t bytes_ = 0;
  double load_seconds_;
  session::SessionConfig cfg_;
  std::vector<report::BenchRecord> records_;
};

// The tokens a turn prefilled and how long that took: the turn's own ids, plus the tools prefix
// when this turn is the session's first and the prefix was not restored from a cache.
std::pair<size_t, double> TurnPrefill(const session::Session& s, const session::TurnResult& t,
                                      bool first_turn) {
  size_t tokens = t.turn_ids.size();
  double seconds = t.prefill_seconds;
  if (first_turn && !s.prefix_from_cache() && !t.context_rebuilt) {
    tokens += s.prefix_ids().size();
    seconds += s.prefix_seconds();
  }
  return {tokens, seconds};
}

// --batch: one request per line, answered on one loaded model; one envelope (or error object)
// per non-blank line on stdout, flushed line by line. Lines that fail make the exit code 1.
void RunBatch(const RunArgs& a, const format::CactFile& file, const std::string& default_tools,
              const session::SessionConfig& cfg, double load_seconds, TurnReport& report) {
  const std::string label = a.batch_path == "-" ? std::string("<stdin>") : a.batch_path;
  std::ifstream file_in;
  std::istream* in = &std::cin;
  if (a.batch_path != "-") {
    std::error_code ec;
    if (std::filesystem::is_directory(a.batch_path, ec))
      Fail<IoError>("{}: is a directory, expected a JSONL file", label);
    file_in.open(a.batch_path, std::ios::binary);
    if (!file_in) Fail<IoError>("{}: cannot open: {}", label, std::strerror(errno));
    in = &file_in;
  }
  session::SessionPool pool(file, cfg);
  const uint32_t max_seq_len = file.geometry().max_seq_len;
  std::string line;
  size_t number = 0, failed = 0;
  while (std::getline(*in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;  // blank: skipped
    try {
      const session::Request req = session::ParseRequest(line, /*with_expected=*/false);
      const int64_t max_tokens = req.max_tokens.value_or(a.max_tokens);
      if (max_tokens > static_cast<int64_t>(max_seq_len))
        Fail<InvalidInput>("max_tokens {} is above the model's max_seq_len {}", max_tokens,
                           max_seq_len);
      bool reused = false;
      session::Session& s =
          pool.Get(req.system.value_or(a.system), req.tools.value_or(default_tools), &reused);
      const session::Reply reply = s.Respond(req.query, static_cast<int>(max_tokens));
      fmt::print("{}\n", reply.EnvelopeJson());
      const auto [tokens, seconds] = TurnPrefill(s, reply.turn, !reused);
      report.Add(tokens, reply.turn, seconds);
      if (a.verbose) LogVerbose(reply, s, load_seconds, reused);
    } catch (const Error& e) {
      ++failed;
      nlohmann::ordered_json j;
      j["line"] = number;
      j["error"] = e.what();
      fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    }
    std::fflush(stdout);
  }
  if (in->bad()) Fail<IoError>("{}: read failed after line {}", label, number);
  if (failed > 0) SetExitCode(1);
}

// --interactive: a conversation read from stdin, a line per turn (after a turn with calls the
// next line is the tool result); lines starting with '/' are commands. On a terminal a prompt
// and hints go to stderr; stdout carries only the envelopes, so it can be piped.
void RunInteractive(const RunArgs& a, const format::CactFile& file, std::string tools_json,
                    const session::SessionConfig& cfg, const report::Stopwatch& load) {
  const bool tty = ::isatty(STDIN_FILENO) && ::isatty(STDERR_FILENO);
  std::string system = a.system;
  auto s = std::make_unique<session::Session>(file, cfg, system, tools_json);
  TurnReport report(a, file, cfg, load.Seconds() - s->prefix_seconds());
  bool first_turn = true, awaiting_result = false;
  const char* help =
      "commands: /reset (forget the conversation), /tools FILE (new tool list; resets), "
      "/system TEXT (new system prompt; resets), /help, /quit (or end of input)";
  if (tty)
    fmt::print(stderr, "needle run: {} tools, budget {} tokens per reply. {}\n", s->num_tools(),
               a.max_tokens, help);
  std::string line;
  while (true) {
    if (tty) fmt::print(stderr, "{}", awaiting_result ? "tool result> " : "> ");
    if (!std::getline(std::cin, line)) break;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (line[0] == '/') {
      const size_t space = line.find(' ');
      const std::string cmd = line.substr(0, space);
      const std::string arg = space == std::string::npos ? "" : line.substr(space + 1);
      try {
        if (cmd == "/quit" || cmd == "/exit") break;
        if (cmd == "/help") {
          fmt::print(stderr, "{}\n", help);
        } else if (cmd == "/reset") {
          s->Reset();
          first_turn = true;
          awaiting_result = false;
          if (tty) fmt::print(stderr, "conversation reset\n");
        } else if (cmd == "/tools" || cmd == "/system") {
          if (cmd == "/tools" && arg.empty()) Fail<UsageError>("/tools needs a FILE");
          std::string next_tools = tools_json, next_system = system;
          if (cmd == "/tools") {
            next_tools = ReadTextInput(arg);
            ValidateTools(next_tools, arg);
          } else {
            next_system = arg;
          }
          s = std::make_unique<session::Session>(file, cfg, next_system, next_tools);
          tools_json = std::move(next_tools);
          system = std::move(next_system);
          first_turn = true;
          awaiting_result = false;
          if (tty) fmt::print(stderr, "{} tools; conversation reset\n", s->num_tools());
        } else {
          Fail<UsageError>("unknown command {} ({})", cmd, help);
        }
      } catch (const Error& e) {
        // A bad command never ends the session; the conversation is unchanged.
        fmt::print(stderr, "needle: error: {}\n", e.what());
      }
      continue;
    }
    const session::Reply reply = s->Respond(line, static_cast<int>(a.max_tokens));
    fmt::print("{}\n", reply.EnvelopeJson());
    std::fflush(stdout);
    const auto [tokens, seconds] = TurnPrefill(*s, reply.turn, first_turn);
    report.Add(tokens, reply.turn, seconds);
    first_turn = false;
    awaiting_result = reply.type == "call" && reply.success && reply.function_calls != "[]";
    if (a.verbose) LogVerbose(reply, *s, load.Seconds(), false);
  }
  if (std::cin.bad()) Fail<IoError>("<stdin>: read failed");
  report.Write();
}

void Run(RunArgs& a) {
  if (a.max_tokens < 0) Fail<UsageError>("-n/--max-tokens must be >= 0 (got {})", a.max_tokens);
  if (a.max_tokens > static_cast<int64_t>(format::kMaxSeqLen))
    Fail<UsageError>("-n/--max-tokens {} is above the limit {} (the largest max_seq_len)",
                     a.max_tokens, format::kMaxSeqLen);
  if (a.verbose) report::RaiseLogLevel("debug", "-v/--verbose");
  if (a.trace) report::RaiseLogLevel("trace", "--trace");
  const bool batch = !a.batch_path.empty();
  const std::string stdin_user = batch ? "--batch" : "-f";
  if (a.tools_path == "-" && (batch ? a.batch_path : a.query_file) == "-")
    Fail<UsageError>("--tools - and {} - both read stdin; give one of them a file", stdin_user);
  if (a.interactive && a.tools_path == "-")
    Fail<UsageError>("--tools - and --interactive both read stdin; give --tools a file");
  if (!batch && !a.interactive) {
    if (!a.query_file.empty()) a.queries.insert(a.queries.begin(), ReadQueryFile(a.query_file));
    if (a.queries.empty())
      Fail<UsageError>(
          "no query: give a QUERY argument, -f FILE, --batch FILE.jsonl or --interactive");
    if (a.queries.size() > 1 && (a.raw || a.print_prompt))
      Fail<UsageError>(
          "{} takes one query; got {} (more queries continue a conversation, which {} "
          "does not run)",
          a.raw ? "--raw" : "--print-prompt", a.queries.size(), a.raw ? "--raw" : "--print-prompt");
  }
  const std::string tools_json = a.tools_path.empty() ? std::string() : ReadTextInput(a.tools_path);
  ValidateTools(tools_json, a.tools_path);
  report::Stopwatch load;
  const format::CactFile file = format::CactFile::Open(
      a.model.path, a.model.no_mmap ? format::LoadMode::kRead : format::LoadMode::kMmap);
  if (a.max_tokens > static_cast<int64_t>(file.geometry().max_seq_len))
    Fail<UsageError>("-n/--max-tokens {} is above the model's max_seq_len {} ({})", a.max_tokens,
                     file.geometry().max_seq_len, a.model.path);
  if (a.print_prompt) return PrintPrompt(file, a, tools_json);

  if (a.kv_window > static_cast<int64_t>(file.geometry().max_seq_len))
    Fail<UsageError>("--kv-window {} is above the model's max_seq_len {} ({})", a.kv_window,
                     file.geometry().max_seq_len, a.model.path);

  session::SessionConfig cfg;
  cfg.threads = a.threads.Resolve();
  cfg.numerics = model::ParseNumericPath(a.numerics.numerics);
  cfg.prefix_cache_dir = PrefixCacheDir(a.prefix_cache);
  cfg.kernels = a.isa.empty() ? nullptr : &kernels::KernelsFor(a.isa);
  cfg.protocol.trace = report::LogEnabled("trace");  // --trace or --log-level trace
  cfg.protocol.conf_rescore = std::getenv("NEEDLE_CONF_RESCORE") != nullptr;  // as the engine
  cfg.protocol.compat.enforce_value_limits = a.schema.enforce;
  if (a.kv_window > 0) cfg.kv_window = static_cast<uint32_t>(a.kv_window);
  if (batch) {
    TurnReport report(a, file, cfg, load.Seconds());
    RunBatch(a, file, tools_json, cfg, load.Seconds(), report);
    return report.Write();
  }
  if (a.interactive) return RunInteractive(a, file, tools_json, cfg, load);
  cfg.keep_prefix_state = false;  // one conversation: never reset (-1.5 MB at the official size)
  session::Session s(file, cfg, a.system, tools_json);
  const double load_seconds = load.Seconds() - s.prefix_seconds();
  TurnReport report(a, file, cfg, load_seconds);
  if (!a.raw) {
    // One envelope per turn and line (also --jsonl); --json: one array of them. Envelopes are
    // printed as the engine writes them (key order, number formats), never re-serialized.
    std::string turns;
    bool first_turn = true;
    for (const std::string& q : a.queries) {
      const session::Reply reply = s.Respond(q, static_cast<int>(a.max_tokens));
      const auto [tokens, seconds] = TurnPrefill(s, reply.turn, first_turn);
      report.Add(tokens, reply.turn, seconds);
      first_turn = false;
      if (a.output.json) {
        // An envelope that is not JSON (the engine reports a call's numbers as written, e.g.
        // "level":011) goes in as a JSON string, so the array stays JSON.
        std::string envelope = reply.EnvelopeJson();
        if (!nlohmann::json::accept(envelope)) envelope = nlohmann::json(envelope).dump();
        turns += (turns.empty() ? "[" : ",") + envelope;
      } else {
        fmt::print("{}\n", reply.EnvelopeJson());
        std::fflush(stdout);
      }
      if (a.verbose) LogVerbose(reply, s, load_seconds, false);
    }
    if (a.output.json) fmt::print("{}]\n", turns);
    return report.Write();
  }
  const session::TurnResult r = s.Complete(a.queries.front(), static_cast<int>(a.max_tokens));
  {
    const auto [tokens, seconds] = TurnPrefill(s, r, true);
    report.Add(tokens, r, seconds);
    report.Write();
  }
  const double peak_mb = double(report::PeakRssBytes()) / (1024.0 * 1024.0);
  const size_t prefill_tokens = s.prefix_ids().size() + r.turn_ids.size();
  const double prefill_seconds = s.prefix_seconds() + r.prefill_seconds;

  if (a.output.machine()) {
    nlohmann::ordered_json j;
    j["text"] = r.text;
    j["generated_ids"] = r.generated_ids;
    j["stop"] = session::StopReasonName(r.stop);
    j["prefix_tokens"] = s.prefix_ids().size();
    j["turn_tokens"] = r.turn_ids.size();
    j["generated_tokens"] = r.generated_ids.size();
    j["load_seconds"] = load_seconds;
    j["prefill_seconds"] = prefill_seconds;
    j["prefill_tps"] = prefill_tokens / std::max(prefill_seconds, 1e-9);
    j["decode_seconds"] = r.decode_seconds;
    j["decode_tps"] = r.decode_tps;
    j["peak_ram_mb"] = peak_mb;
    a.output.Emit(j, {});
    return;
  }
  fmt::print("{}\n", r.text);
  report::Log(
      report::LogSeverity::kInfo,
      "{} tokens generated, stop: {}; load {:.3f} s | prefill {} tokens {:.1f} tok/s | decode "
      "{:.1f} tok/s | peak RSS {:.1f} MiB",
      r.generated_ids.size(), session::StopReasonName(r.stop), load_seconds, prefill_tokens,
      prefill_tokens / std::max(prefill_seconds, 1e-9), r.decode_tps, peak_mb);
}

}  // namespace

void RegisterRun(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "run", "Answer queries with a tool list (the engine's protocol; prints reply envelopes)");
  auto a = std::make_shared<RunArgs>();
  a->model.Attach(cmd);
  auto* query = cmd->add_option("query", a->queries,
                                "The user's query; more arguments continue the conversation "
                                "(after a turn with calls the next one is the tool result)");
  auto* query_file = cmd->add_option("-f,--file", a->query_file,
                                     "Read the first query from a file ('-' = stdin; one final "
                                     "line break is dropped); QUERY "
                                     "arguments then continue the conversation")
                         ->type_name("FILE");
  auto* batch =
      cmd->add_option(
             "--batch", a->batch_path,
             "Answer independent requests, one JSON object per line ({\"query\", \"tools\", "
             "\"system\", \"max_tokens\"}; '-' = stdin) on one loaded model; one envelope or "
             "{\"line\",\"error\"} per line; exit 1 if a line failed")
          ->type_name("FILE.jsonl");
  batch->excludes(query)->excludes(query_file);
  cmd->add_option("--tools", a->tools_path,
                  "Tools JSON file (an array of {name, description, parameters}); '-' = stdin");
  cmd->add_option("--system", a->system, "System prompt text");
  auto* prefix_cache = cmd->add_option(
      "--prefix-cache", a->prefix_cache,
      "Folder of persisted tools-prefix states: reuse the prefix of the same model, "
      "tools, system and numerics instead of prefilling it (written on a miss; default: "
      "$NEEDLE_PREFIX_CACHE)");
  auto* max_tokens =
      cmd->add_option("-n,--max-tokens", a->max_tokens, "Token budget per reply (max_new_tokens)")
          ->default_val(256);
  a->threads.Attach(cmd);
  a->numerics.Attach(cmd);
  a->schema.Attach(cmd);
  auto* isa =
      cmd->add_option("--isa", a->isa,
                      "Force a kernel ISA (scalar, avx2, avx512, neon, dotprod); default: fastest");
  auto* print_prompt =
      cmd->add_flag("--print-prompt", a->print_prompt,
                    "Print the rendered prompt text and token ids, without running the model");
  auto* raw =
      cmd->add_flag("--raw", a->raw,
                    "Plain greedy decoding of the first query without the protocol; print the "
                    "text (with --json: ids, stop reason, timings)");
  auto* trace = cmd->add_flag(
      "--trace", a->trace,
      "Log every decoding decision (top valid tokens, branching, grounding) on stderr (log "
      "level trace)");
  auto* verbose = cmd->add_flag(
      "-v,--verbose", a->verbose,
      "Also log each turn's ids, generated text, budget use and Hc/Dc on stderr (log level "
      "debug)");
  auto* kv_window =
      cmd->add_option("--kv-window", a->kv_window,
                      "Sliding attention window in positions, besides the pinned tools prefix "
                      "(default: the model header's kv_window)")
          ->check(CLI::Range(int64_t{1}, int64_t{format::kMaxSeqLen}));
  auto* report = cmd->add_option("--report", a->report_path,
                                 "Also write the bench records (bench -o json schema) of the "
                                 "turns answered: tokens, prefill, first token, decode, peak RSS")
                     ->type_name("FILE.json");
  auto* interactive = cmd->add_flag(
      "-i,--interactive", a->interactive,
      "A conversation on stdin, a line per turn (/reset, /tools FILE, /system TEXT, /help, "
      "/quit); one envelope per turn on stdout");
  a->output.Attach(cmd);
  batch->excludes(print_prompt)->excludes(raw)->excludes("--json");
  interactive->excludes(query)->excludes(query_file)->excludes(batch)->excludes(print_prompt);
  interactive->excludes(raw)->excludes("--json");
  print_prompt->excludes(kv_window)->excludes(report)->excludes("--enforce-schema");
  raw->excludes("--enforce-schema");
  // --print-prompt runs no decoding (nothing to budget, log or accelerate, no prefix state), and
  // --raw logs no turn (-v's JSON lines are the protocol's).
  for (CLI::Option* unused : {raw, max_tokens, prefix_cache, isa, trace, verbose})
    print_prompt->excludes(unused);
  raw->excludes(verbose);
  KeepBracketedArguments(cmd);  // queries and tool results that are JSON arrays
  cmd->callback([a, cmd] {
    a->threads_given = cmd->count("--threads") > 0;
    a->numerics_given = cmd->count("--numerics") > 0;
    Run(*a);
  });
}

}  // namespace needle::cli
