// Session bench record renderers.
#include "report/session_record.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <span>
#include <utility>

#include "report/render_text.h"
#include "report/timer.h"

namespace needle::report {

namespace {

std::vector<double> Milliseconds(const std::vector<double>& seconds) {
  std::vector<double> ms = seconds;
  for (double& v : ms) v *= 1e3;
  return ms;
}
// NaN for no samples (null / empty / NULL / "-" in the formats).
double MedianMs(const std::vector<double>& s) { return s.empty() ? NAN : Median(s) * 1e3; }
double MadMs(const std::vector<double>& s) { return s.empty() ? NAN : MedianAbsDeviation(s) * 1e3; }
// A count, or `missing` when not known (negative).
std::string Count(int n, const char* missing) { return n < 0 ? missing : std::to_string(n); }
nlohmann::ordered_json JsonNumber(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
}

// Columns of the CSV and SQL forms, in order, with their SQL types (SQL puts the system's first).
constexpr std::pair<const char*, const char*> kColumns[] = {{"engine", "TEXT"},
                                                            {"model", "TEXT"},
                                                            {"model_sha256", "TEXT"},
                                                            {"model_bytes", "INTEGER"},
                                                            {"isa", "TEXT"},
                                                            {"path", "TEXT"},
                                                            {"threads", "INTEGER"},
                                                            {"repetitions", "INTEGER"},
                                                            {"budget", "INTEGER"},
                                                            {"query", "TEXT"},
                                                            {"prefix_tokens", "INTEGER"},
                                                            {"turn_tokens", "INTEGER"},
                                                            {"reply_tokens", "INTEGER"},
                                                            {"reply_type", "TEXT"},
                                                            {"load_ms", "REAL"},
                                                            {"init_ms", "REAL"},
                                                            {"init_cached_ms", "REAL"},
                                                            {"reply_ms", "REAL"},
                                                            {"peak_rss_bytes", "INTEGER"}};

// The values of kColumns for r; `text` quotes a string for the format.
template <typename Quote>
std::vector<std::string> Values(const SessionBenchRecord& r, Quote text, const char* missing) {
  return {text(r.engine),
          text(r.model),
          text(r.model_sha256),
          std::to_string(r.model_bytes),
          text(r.isa),
          text(r.path),
          std::to_string(r.threads),
          std::to_string(r.repetitions),
          std::to_string(r.budget),
          text(r.query),
          Count(r.prefix_tokens, missing),
          Count(r.turn_tokens, missing),
          Count(r.reply_tokens, missing),
          text(r.reply_type),
          Number(MedianMs(r.load_s), missing),
          Number(MedianMs(r.init_s), missing),
          Number(MedianMs(r.init_cached_s), missing),
          Number(MedianMs(r.reply_s), missing),
          std::to_string(r.peak_rss_bytes)};
}

std::string MsCell(const std::vector<double>& s) {
  return s.empty() ? std::string("-") : fmt::format("{:.2f} ± {:.2f}", MedianMs(s), MadMs(s));
}

}  // namespace

nlohmann::ordered_json ToJson(const SessionBenchRecord& r) {
  nlohmann::ordered_json j;
  j["engine"] = r.engine;
  j["scenario"] = "session";
  j["model"] = r.model;
  j["model_sha256"] = r.model_sha256;
  j["isa"] = r.isa;
  j["path"] = r.path;
  j["threads"] = r.threads;
  j["repetitions"] = r.repetitions;
  j["budget"] = r.budget;
  j["query"] = r.query;
  j["prefix_tokens"] = r.prefix_tokens;
  j["turn_tokens"] =
      r.turn_tokens < 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.turn_tokens);
  j["reply_tokens"] = r.reply_tokens;
  j["reply_type"] = r.reply_type;
  const std::pair<const char*, const std::vector<double>*> times[] = {
      {"load", &r.load_s},
      {"init", &r.init_s},
      {"init_cached", &r.init_cached_s},
      {"reply", &r.reply_s}};
  for (const auto& [name, samples] : times) {
    j[fmt::format("{}_ms", name)] = JsonNumber(MedianMs(*samples));
    j[fmt::format("{}_ms_mad", name)] = JsonNumber(MadMs(*samples));
  }
  for (const auto& [name, samples] : times)
    j[fmt::format("{}_ms_samples", name)] = Milliseconds(*samples);
  j["peak_rss_bytes"] = r.peak_rss_bytes;
  j["model_bytes"] = r.model_bytes;
  return j;
}

SessionBenchWriter::SessionBenchWriter(BenchFormat format, SystemInfo system)
    : format_(format), system_(std::move(system)) {}

std::string SessionBenchWriter::Begin() const {
  switch (format_) {
    case BenchFormat::kJson:
      return JsonBegin(system_);
    case BenchFormat::kJsonl:
      return "";
    case BenchFormat::kCsv: {
      std::vector<std::string> names;
      for (const auto& column : kColumns) names.emplace_back(column.first);
      return fmt::format("{},cpu,git_commit\n", fmt::join(names, ","));
    }
    case BenchFormat::kSql:
      return SqlCreateTable(kSqlTable, kColumns);
    case BenchFormat::kMarkdown:
      return MdTableStart(
          system_,
          {"engine", "model", "isa", "path", "threads", "prefix", "turn", "reply", "load ms",
           "init ms", "init (cached prefix) ms", "reply ms", "peak RSS MiB"},
          4);
  }
  return {};
}

std::string SessionBenchWriter::Row(const SessionBenchRecord& r) {
  const size_t index = rows_++;
  switch (format_) {
    case BenchFormat::kJson:
    case BenchFormat::kJsonl:
      return JsonRecordText(ToJson(r), system_, format_ == BenchFormat::kJsonl, index);
    case BenchFormat::kCsv:
      return fmt::format("{},{},{}\n", fmt::join(Values(r, CsvField, ""), ","),
                         CsvField(system_.cpu_model), system_.commit);
    case BenchFormat::kSql:
      return SqlInsert(kSqlTable, kColumns, system_, Values(r, SqlText, "NULL"));
    case BenchFormat::kMarkdown:
      return MdRow({r.engine, r.model, r.isa, r.path, std::to_string(r.threads),
                    Count(r.prefix_tokens, "-"), Count(r.turn_tokens, "-"),
                    fmt::format("{} {}", r.reply_tokens, r.reply_type), MsCell(r.load_s),
                    MsCell(r.init_s), MsCell(r.init_cached_s), MsCell(r.reply_s),
                    MdMiB(r.peak_rss_bytes)});
  }
  return {};
}

std::string SessionBenchWriter::End() const {
  return WriterEnd(format_, rows_,
                   "prefix / turn: tokens prefilled; reply: committed tokens and the reply's type; "
                   "times: median ± median absolute deviation.");
}

}  // namespace needle::report
