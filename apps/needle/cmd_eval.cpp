// needle eval: exact-call accuracy of a model on a JSONL set of {tools, query, expected} lines,
// overall and per tool, with every failing line; --min-accuracy turns it into a CI gate.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "base/error.h"
#include "commands.h"
#include "format/cact.h"
#include "kernels/dispatch.h"
#include "options.h"
#include "report/log.h"
#include "report/progress.h"
#include "report/table.h"
#include "session/eval.h"
#include "session/pool.h"
#include "session/request.h"
#include "session/session.h"
#include "text/json_text.h"
#include "text/prompt.h"

namespace needle::cli {

namespace {

struct EvalArgs {
  ModelArgs model;
  OutputArgs output;
  ThreadArgs threads;
  NumericsArgs numerics;
  SchemaArgs schema;
  std::string data_path;
  std::string tools_path;
  std::string system;
  std::string prefix_cache;
  std::string isa;
  int64_t max_tokens = 256;
  std::optional<double> min_accuracy;
};

// One line that did not give the expected calls.
struct Failure {
  size_t line = 0;
  std::optional<std::string> query;
  nlohmann::ordered_json expected, got;  // null when the line could not be run
  std::optional<std::string> type, error;
};

struct ToolScore {
  size_t lines = 0, exact = 0;
};

std::string Percent(size_t part, size_t whole) {
  return fmt::format("{:.1f}%", whole ? 100.0 * double(part) / double(whole) : 0.0);
}

std::string Dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void Eval(const EvalArgs& a) {
  if (a.max_tokens < 0 || a.max_tokens > static_cast<int64_t>(format::kMaxSeqLen))
    Fail<UsageError>("-n/--max-tokens must be in [0, {}] (got {})", format::kMaxSeqLen,
                     a.max_tokens);
  if (a.tools_path == "-" && a.data_path == "-")
    Fail<UsageError>("--tools - and DATA.jsonl - both read stdin; give one of them a file");
  const std::string default_tools = a.tools_path.empty() ? "" : ReadTextInput(a.tools_path);
  if (!default_tools.empty()) {
    const std::string label = (a.tools_path == "-" ? "<stdin>" : a.tools_path) + ": tools";
    (void)text::ToolInventory(text::RenderToolsText(default_tools, label), label);
  }
  const std::string data_label = a.data_path == "-" ? "<stdin>" : a.data_path;
  std::vector<std::pair<size_t, std::string>> lines;  // (line number, text), blank lines skipped
  {
    std::istringstream in(ReadTextInput(a.data_path));
    size_t number = 0;
    for (std::string line; std::getline(in, line);) {
      ++number;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") != std::string::npos) lines.emplace_back(number, line);
    }
  }
  if (lines.empty())
    Fail<InvalidInput>("{}: no requests (the file has no non-blank line)", data_label);

  const format::CactFile file = format::CactFile::Open(
      a.model.path, a.model.no_mmap ? format::LoadMode::kRead : format::LoadMode::kMmap);
  const uint32_t max_seq_len = file.geometry().max_seq_len;
  if (a.max_tokens > static_cast<int64_t>(max_seq_len))
    Fail<UsageError>("-n/--max-tokens {} is above the model's max_seq_len {} ({})", a.max_tokens,
                     max_seq_len, a.model.path);
  session::SessionConfig cfg;
  cfg.threads = a.threads.Resolve();
  cfg.numerics = model::ParseNumericPath(a.numerics.numerics);
  cfg.prefix_cache_dir = PrefixCacheDir(a.prefix_cache);
  cfg.kernels = a.isa.empty() ? nullptr : &kernels::KernelsFor(a.isa);
  cfg.protocol.compat.enforce_value_limits = a.schema.enforce;
  session::SessionPool pool(file, cfg);

  size_t exact = 0, errors = 0;
  std::map<std::string, ToolScore> per_tool;  // by expected tool name
  ToolScore no_call;                          // lines expecting no call
  std::vector<Failure> failures;
  report::Progress progress("eval", lines.size());
  for (const auto& [number, line] : lines) {
    Failure f;
    f.line = number;
    try {
      const session::Request req = session::ParseRequest(line, /*with_expected=*/true);
      f.query = req.query;
      const std::vector<session::Call> expected = session::ParseCalls(*req.expected, "expected");
      f.expected = session::CallsJson(expected);
      const int64_t max_tokens = req.max_tokens.value_or(a.max_tokens);
      if (max_tokens > static_cast<int64_t>(max_seq_len))
        Fail<InvalidInput>("max_tokens {} is above the model's max_seq_len {}", max_tokens,
                           max_seq_len);
      session::Session& s =
          pool.Get(req.system.value_or(a.system), req.tools.value_or(default_tools));
      const session::Reply reply = s.Respond(req.query, static_cast<int>(max_tokens));
      // A successful reply's calls may not be JSON (the engine reports numbers as written, e.g.
      // "level":011): such a line counts as wrong, it does not stop the evaluation.
      const bool json_calls = nlohmann::json::accept(reply.function_calls);
      const std::vector<session::Call> got =
          json_calls ? session::ParseCalls(reply.function_calls, "the reply's function_calls")
                     : std::vector<session::Call>{};
      const bool ok = reply.success && json_calls && session::SameCalls(got, expected);
      exact += ok;
      std::vector<std::string> names;
      names.reserve(expected.size());
      for (const session::Call& c : expected) names.push_back(c.name);
      std::sort(names.begin(), names.end());
      names.erase(std::unique(names.begin(), names.end()), names.end());
      for (const std::string& n : names) {
        per_tool[n].lines++;
        per_tool[n].exact += ok;
      }
      if (names.empty()) {
        no_call.lines++;
        no_call.exact += ok;
      }
      if (!ok) {
        f.got = json_calls ? session::CallsJson(got) : nlohmann::ordered_json(reply.function_calls);
        f.type = reply.type;
        f.error = reply.error;
        failures.push_back(std::move(f));
      }
    } catch (const Error& e) {
      ++errors;
      f.error = e.what();
      failures.push_back(std::move(f));
    }
    progress.Advance();
  }
  progress.Finish();

  const size_t total = lines.size();
  const double accuracy = double(exact) / double(total);
  const bool pass = !a.min_accuracy || accuracy >= *a.min_accuracy;
  if (a.output.machine()) {
    nlohmann::ordered_json j;
    j["model"] = a.model.path;
    j["data"] = data_label;
    j["lines"] = total;
    j["exact"] = exact;
    j["accuracy"] = accuracy;
    j["errors"] = errors;
    j["min_accuracy"] = a.min_accuracy ? nlohmann::ordered_json(*a.min_accuracy) : nullptr;
    j["pass"] = pass;
    auto tool_json = [](const nlohmann::ordered_json& name, const ToolScore& t) {
      nlohmann::ordered_json o;
      o["name"] = name;
      o["lines"] = t.lines;
      o["exact"] = t.exact;
      o["accuracy"] = double(t.exact) / double(t.lines);
      return o;
    };
    j["tools"] = nlohmann::ordered_json::array();
    for (const auto& [name, t] : per_tool) j["tools"].push_back(tool_json(name, t));
    if (no_call.lines) j["tools"].push_back(tool_json(nullptr, no_call));
    j["failures"] = nlohmann::ordered_json::array();
    for (const Failure& f : failures) {
      nlohmann::ordered_json o;
      o["line"] = f.line;
      o["query"] = f.query ? nlohmann::ordered_json(*f.query) : nullptr;
      o["expected"] = f.expected;
      o["got"] = f.got;
      o["type"] = f.type ? nlohmann::ordered_json(*f.type) : nullptr;
      o["error"] = f.error ? nlohmann::ordered_json(*f.error) : nullptr;
      j["failures"].push_back(std::move(o));
    }
    a.output.Emit(j, {"tools", "failures"});
  } else {
    fmt::print("{}: {}/{} exact calls ({}){}\n", data_label, exact, total, Percent(exact, total),
               errors ? fmt::format(", {} line(s) could not be run", errors) : "");
    report::Table table({"tool", "lines", "exact", "accuracy"},
                        {report::Table::Align::kLeft, report::Table::Align::kRight,
                         report::Table::Align::kRight, report::Table::Align::kRight});
    auto row = [&](const std::string& name, const ToolScore& t) {
      table.AddRow(
          {name, std::to_string(t.lines), std::to_string(t.exact), Percent(t.exact, t.lines)});
    };
    for (const auto& [name, t] : per_tool) row(name, t);
    if (no_call.lines) row("(no call)", no_call);
    fmt::print("{}", table.Render(2));
    if (!failures.empty()) fmt::print("failures\n");
    for (const Failure& f : failures) {
      if (!f.query) {
        fmt::print("  line {}: {}\n", f.line, *f.error);
        continue;
      }
      fmt::print("  line {}: {} expected {}, got {}{}\n", f.line, Dump(*f.query), Dump(f.expected),
                 Dump(f.got),
                 f.error ? fmt::format(" ({} failed: {})", f.type.value_or("reply"), *f.error)
                 : f.got.is_null() ? std::string()
                                   : fmt::format(" ({})", f.type.value_or("reply")));
    }
  }
  if (!pass) {
    report::Log(report::LogSeverity::kError, "eval: accuracy {:.4f} is below --min-accuracy {:.4f}",
                accuracy, *a.min_accuracy);
    SetExitCode(1);
  }
}

}  // namespace

void RegisterEval(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "eval", "Exact-call accuracy on a JSONL set of {tools, query, expected} lines (CI gate)");
  auto a = std::make_shared<EvalArgs>();
  a->model.Attach(cmd);
  cmd->add_option("data", a->data_path,
                  "JSONL file, one {\"query\", \"expected\": [{\"name\", \"arguments\"}], "
                  "\"tools\", \"system\", \"max_tokens\"} per line ('-' = stdin)")
      ->required()
      ->type_name("DATA.jsonl");
  cmd->add_option("--tools", a->tools_path,
                  "Tools JSON file for lines without \"tools\" ('-' = stdin)");
  cmd->add_option("--system", a->system, "System prompt for lines without \"system\"");
  cmd->add_option("-n,--max-tokens", a->max_tokens, "Token budget for lines without \"max_tokens\"")
      ->default_val(256);
  cmd->add_option("--min-accuracy", a->min_accuracy,
                  "Exit 1 when the exact-call accuracy (0..1) is below this")
      ->check(CLI::Range(0.0, 1.0));
  a->schema.Attach(cmd);
  cmd->add_option("--prefix-cache", a->prefix_cache,
                  "Folder of persisted tools-prefix states (as needle run --prefix-cache; default: "
                  "$NEEDLE_PREFIX_CACHE)");
  a->threads.Attach(cmd);
  a->numerics.Attach(cmd);
  cmd->add_option("--isa", a->isa, "Force a kernel ISA (scalar, avx2, avx512); default: fastest");
  a->output.Attach(cmd);
  cmd->callback([a] { Eval(*a); });
}

}  // namespace needle::cli
