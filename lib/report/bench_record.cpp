// Bench record renderers.
#include "report/bench_record.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "base/error.h"
#include "report/render_text.h"
#include "report/timer.h"

namespace needle::report {

double BenchRecord::prefill_median() const { return Median(prefill_tok_s); }
double BenchRecord::decode_median() const { return Median(decode_tok_s); }
double BenchRecord::pg_median() const {
  if (total_s.empty()) return 0.0;
  std::vector<double> rates;
  for (const double t : total_s) rates.push_back((prompt_tokens + gen_tokens) / std::max(t, 1e-12));
  return Median(rates);
}
double BenchRecord::decode_ceiling_tok_s() const {
  const uint64_t bytes = weight_bytes_per_token + kv_bytes_per_token;
  return weight_bytes_per_token ? read_bytes_per_s / static_cast<double>(bytes) : 0.0;
}

double BenchRecord::compute_ceiling_tok_s() const {
  return macs_per_token ? macs_per_s / static_cast<double>(macs_per_token) : 0.0;
}

namespace {
// Percent of the read ceiling reached by the decode median (0 without a measurement).
double PercentOfCeiling(const BenchRecord& r) {
  const double c = r.decode_ceiling_tok_s();
  return c > 0 ? 100.0 * r.decode_median() / c : 0.0;
}
// Percent of the compute ceiling reached by a median rate (0 without a measurement).
double PercentOfComputeCeiling(const BenchRecord& r, double tok_s) {
  const double c = r.compute_ceiling_tok_s();
  return c > 0 ? 100.0 * tok_s / c : 0.0;
}
double PercentOfComputeCeiling(const BenchRecord& r) {
  return PercentOfComputeCeiling(r, r.decode_median());
}
}  // namespace

BenchFormat ParseBenchFormat(const std::string& s) {
  if (s == "md") return BenchFormat::kMarkdown;
  if (s == "json") return BenchFormat::kJson;
  if (s == "jsonl") return BenchFormat::kJsonl;
  if (s == "csv") return BenchFormat::kCsv;
  if (s == "sql") return BenchFormat::kSql;
  Fail<UsageError>("unknown output format '{}' (expected md, json, jsonl, csv or sql)", s);
}

nlohmann::ordered_json ToJson(const BenchRecord& r) {
  nlohmann::ordered_json j;
  j["engine"] = r.engine;
  j["model"] = r.model;
  j["model_sha256"] = r.model_sha256;
  j["isa"] = r.isa;
  j["path"] = r.path;
  j["threads"] = r.threads;
  j["prompt_tokens"] = r.prompt_tokens;
  j["gen_tokens"] = r.gen_tokens;
  j["chunk"] = r.chunk;
  j["repetitions"] = r.repetitions;
  j["load_seconds"] = r.load_seconds;
  // Milliseconds, or null where this engine reports no such time.
  auto ms = [](const std::vector<double>& s, bool mad = false) {
    return s.empty() ? nlohmann::ordered_json(nullptr)
                     : nlohmann::ordered_json((mad ? MedianAbsDeviation(s) : Median(s)) * 1e3);
  };
  j["tokenize_ms"] = ms(r.tokenize_s);
  j["first_token_ms"] = ms(r.first_token_s);
  j["first_token_ms_mad"] = ms(r.first_token_s, true);
  j["total_ms"] = ms(r.total_s);
  j["pg_tok_s"] =
      r.total_s.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.pg_median());
  j["prefill_tok_s"] = r.prefill_median();
  j["decode_tok_s"] = r.decode_median();
  j["prefill_tok_s_mad"] = MedianAbsDeviation(r.prefill_tok_s);
  j["decode_tok_s_mad"] = MedianAbsDeviation(r.decode_tok_s);
  j["prefill_samples"] = r.prefill_tok_s;
  j["decode_samples"] = r.decode_tok_s;
  std::vector<double> first_ms = r.first_token_s;
  for (double& v : first_ms) v *= 1e3;
  j["first_token_ms_samples"] = first_ms;
  j["peak_rss_bytes"] = r.peak_rss_bytes;
  j["model_bytes"] = r.model_bytes;
  j["weight_bytes_per_token"] = r.weight_bytes_per_token;
  j["kv_bytes_per_token"] = r.kv_bytes_per_token;
  j["read_gb_s"] = r.read_bytes_per_s / 1e9;
  j["decode_ceiling_tok_s"] = r.decode_ceiling_tok_s();
  j["decode_pct_of_ceiling"] = PercentOfCeiling(r);
  j["macs_per_token"] = r.macs_per_token;
  j["mac_gops"] = r.macs_per_s / 1e9;
  j["compute_ceiling_tok_s"] = r.compute_ceiling_tok_s();
  j["decode_pct_of_compute_ceiling"] = PercentOfComputeCeiling(r);
  // Prefill runs the same products for every token (as multi-token GEMMs): the same ceiling.
  j["prefill_pct_of_compute_ceiling"] = PercentOfComputeCeiling(r, r.prefill_median());
  return j;
}

namespace {

// The SQL columns after the system's, in order, with their types: the parameters, the results.
constexpr std::pair<const char*, const char*> kSqlColumns[] = {
    {"engine", "TEXT"},
    {"model", "TEXT"},
    {"model_sha256", "TEXT"},
    {"model_bytes", "INTEGER"},
    {"isa", "TEXT"},
    {"path", "TEXT"},
    {"threads", "INTEGER"},
    {"prompt_tokens", "INTEGER"},
    {"gen_tokens", "INTEGER"},
    {"chunk", "INTEGER"},
    {"repetitions", "INTEGER"},
    {"load_seconds", "REAL"},
    {"tokenize_ms", "REAL"},
    {"first_token_ms", "REAL"},
    {"total_ms", "REAL"},
    {"pg_tok_s", "REAL"},
    {"prefill_tok_s", "REAL"},
    {"prefill_tok_s_mad", "REAL"},
    {"decode_tok_s", "REAL"},
    {"decode_tok_s_mad", "REAL"},
    {"prefill_samples", "TEXT"},
    {"decode_samples", "TEXT"},
    {"peak_rss_bytes", "INTEGER"},
    {"weight_bytes_per_token", "INTEGER"},
    {"kv_bytes_per_token", "INTEGER"},
    {"read_gb_s", "REAL"},
    {"decode_ceiling_tok_s", "REAL"},
    {"macs_per_token", "INTEGER"},
    {"mac_gops", "REAL"},
    {"compute_ceiling_tok_s", "REAL"}};

}  // namespace

BenchWriter::BenchWriter(BenchFormat format, SystemInfo system)
    : format_(format), system_(std::move(system)) {}

std::string BenchWriter::Begin() const {
  switch (format_) {
    case BenchFormat::kJson:
      return JsonBegin(system_);
    case BenchFormat::kJsonl:
      return "";
    case BenchFormat::kCsv:
      return "engine,model,model_sha256,isa,path,threads,prompt_tokens,gen_tokens,chunk,"
             "repetitions,load_seconds,tokenize_ms,first_token_ms,prefill_tok_s,decode_tok_s,"
             "pg_tok_s,total_ms,peak_rss_bytes,decode_ceiling_tok_s,compute_ceiling_tok_s,cpu,"
             "git_commit\n";
    case BenchFormat::kSql:
      return SqlCreateTable(kSqlTable, kSqlColumns);
    case BenchFormat::kMarkdown:
      return MdTableStart(system_,
                          {"engine", "model", "isa", "path", "threads", "pp", "tg", "chunk",
                           "load s", "first token ms", "prefill tok/s", "decode tok/s", "pg tok/s",
                           "% of read ceiling", "% of compute ceiling", "peak RSS MiB"},
                          4);
  }
  return {};
}

std::string BenchWriter::Row(const BenchRecord& r) {
  const size_t index = rows_++;
  switch (format_) {
    case BenchFormat::kJson:
    case BenchFormat::kJsonl:
      return JsonRecordText(ToJson(r), system_, format_ == BenchFormat::kJsonl, index);
    case BenchFormat::kCsv:
      return fmt::format(
          "{},{},{},{},{},{},{},{},{},{},{:.4f},{:.3f},{:.3f},{:.2f},{:.2f},{:.2f},{:.3f},{},{:.2f}"
          ",{:.2f},{},{}\n",
          r.engine, CsvField(r.model), r.model_sha256, r.isa, r.path, r.threads, r.prompt_tokens,
          r.gen_tokens, r.chunk, r.repetitions, r.load_seconds, Median(r.tokenize_s) * 1e3,
          Median(r.first_token_s) * 1e3, r.prefill_median(), r.decode_median(), r.pg_median(),
          Median(r.total_s) * 1e3, r.peak_rss_bytes, r.decode_ceiling_tok_s(),
          r.compute_ceiling_tok_s(), CsvField(system_.cpu_model), system_.commit);
    case BenchFormat::kSql: {
      const std::vector<std::string> values = {
          SqlText(r.engine),
          SqlText(r.model),
          SqlText(r.model_sha256),
          std::to_string(r.model_bytes),
          SqlText(r.isa),
          SqlText(r.path),
          std::to_string(r.threads),
          std::to_string(r.prompt_tokens),
          std::to_string(r.gen_tokens),
          std::to_string(r.chunk),
          std::to_string(r.repetitions),
          Number(r.load_seconds, "NULL"),
          r.tokenize_s.empty() ? "NULL" : Number(Median(r.tokenize_s) * 1e3, "NULL"),
          r.first_token_s.empty() ? "NULL" : Number(Median(r.first_token_s) * 1e3, "NULL"),
          r.total_s.empty() ? "NULL" : Number(Median(r.total_s) * 1e3, "NULL"),
          r.total_s.empty() ? "NULL" : Number(r.pg_median(), "NULL"),
          Number(r.prefill_median(), "NULL"),
          Number(MedianAbsDeviation(r.prefill_tok_s), "NULL"),
          Number(r.decode_median(), "NULL"),
          Number(MedianAbsDeviation(r.decode_tok_s), "NULL"),
          SqlText(Dump(nlohmann::ordered_json(r.prefill_tok_s))),
          SqlText(Dump(nlohmann::ordered_json(r.decode_tok_s))),
          std::to_string(r.peak_rss_bytes),
          std::to_string(r.weight_bytes_per_token),
          std::to_string(r.kv_bytes_per_token),
          Number(r.read_bytes_per_s / 1e9, "NULL"),
          Number(r.decode_ceiling_tok_s(), "NULL"),
          std::to_string(r.macs_per_token),
          Number(r.macs_per_s / 1e9, "NULL"),
          Number(r.compute_ceiling_tok_s(), "NULL")};
      return SqlInsert(kSqlTable, kSqlColumns, system_, values);
    }
    case BenchFormat::kMarkdown:
      return MdRow(
          {r.engine, r.model, r.isa, r.path, std::to_string(r.threads),
           std::to_string(r.prompt_tokens), std::to_string(r.gen_tokens), std::to_string(r.chunk),
           fmt::format("{:.3f}", r.load_seconds),
           r.first_token_s.empty() ? std::string("-")
                                   : fmt::format("{:.2f}", Median(r.first_token_s) * 1e3),
           fmt::format("{:.1f} ± {:.1f}", r.prefill_median(), MedianAbsDeviation(r.prefill_tok_s)),
           r.decode_tok_s.empty() ? std::string("-")
                                  : fmt::format("{:.1f} ± {:.1f}", r.decode_median(),
                                                MedianAbsDeviation(r.decode_tok_s)),
           r.total_s.empty() ? std::string("-") : fmt::format("{:.1f}", r.pg_median()),
           r.decode_ceiling_tok_s() > 0
               ? fmt::format("{:.0f}% of {:.0f}", PercentOfCeiling(r), r.decode_ceiling_tok_s())
               : std::string("-"),
           r.compute_ceiling_tok_s() > 0
               ? fmt::format("{:.0f}% of {:.0f}", PercentOfComputeCeiling(r),
                             r.compute_ceiling_tok_s())
               : std::string("-"),
           MdMiB(r.peak_rss_bytes)});
  }
  return {};
}

std::string WriterEnd(BenchFormat f, size_t rows, const char* md_footnote) {
  switch (f) {
    case BenchFormat::kJson:
      return JsonEnd(rows);
    case BenchFormat::kMarkdown:
      return fmt::format("\n{}\n", md_footnote);
    default:
      return "";
  }
}

std::string BenchWriter::End() const {
  return WriterEnd(format_, rows_,
                   "% of read ceiling: the decode median against one thread's read bandwidth "
                   "(measured after each point) divided by the bytes a decoded token reads: the "
                   "weights and the K/V cache of the positions it attends to (mean over the "
                   "point's steps). % of compute ceiling: the decode median against one "
                   "thread's peak rate of the int8 product instruction (measured after each "
                   "point) divided by the int8 multiply-adds of a token's weight products.");
}

std::string Render(const std::vector<BenchRecord>& records, const SystemInfo& sys, BenchFormat f) {
  BenchWriter w(f, sys);
  std::string out = w.Begin();
  for (const BenchRecord& r : records) out += w.Row(r);
  return out + w.End();
}

}  // namespace needle::report
