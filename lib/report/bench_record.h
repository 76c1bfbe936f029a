// One benchmark record schema (llama-bench style) and its renderers: md (a Markdown table), json,
// jsonl, csv, sql (CREATE TABLE + INSERTs). A record is one point of the parameter cross product;
// raw samples are kept next to medians. BenchWriter streams: a row as soon as a point is done.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "report/system.h"

namespace needle::report {

struct BenchRecord {
  // Parameters of this point.
  std::string engine = "needle";  // "official": a comparison row run on the official engine
  std::string model;              // path
  std::string model_sha256;       // of the whole file
  std::string isa;                // kernel path used ("avx2", "scalar", ...)
  std::string path;               // numeric path ("f32", ...)
  int threads = 1;
  int prompt_tokens = 0;
  int gen_tokens = 0;
  int chunk = 0;  // prefill tokens per forward call
  int repetitions = 0;
  // Results.
  double load_seconds = 0;            // open + validate + build weights (median)
  std::vector<double> prefill_tok_s;  // one sample per repetition
  std::vector<double> decode_tok_s;
  // Seconds per repetition: tokenizing the prompt text, from the start (tokenizing included) until
  // the first generated token is chosen, and the whole request (tokenize + prefill + decode).
  std::vector<double> tokenize_s, first_token_s, total_s;
  uint64_t peak_rss_bytes = 0;  // this point's peak (reset before it where the OS allows)
  uint64_t model_bytes = 0;
  // Machine limit measured at this point: weights one decoded token reads, and one thread's read
  // bandwidth over a buffer that size (best of repeated passes, right after the repetitions).
  uint64_t weight_bytes_per_token = 0;
  // K/V cache bytes a decode step reads (codes and scales of the positions it attends to, every
  // layer), mean over the point's steps: it grows with the context, up to sinks + window.
  uint64_t kv_bytes_per_token = 0;
  double read_bytes_per_s = 0;
  // The other machine limit: int8 multiply-adds of one decoded token's weight products, and one
  // thread's peak rate of the kernel table's int8 product instruction (kernels::MacPeakFn, best
  // of repeated passes, measured after the repetitions too).
  uint64_t macs_per_token = 0;
  double macs_per_s = 0;

  // read_bytes_per_s / (weight_bytes_per_token + kv_bytes_per_token): decode speed if only
  // reading the weights and the K/V cache cost time.
  double decode_ceiling_tok_s() const;
  // macs_per_s / macs_per_token: decode (or prefill) speed if only the weight products' int8
  // multiply-adds cost time, at the peak rate (0 when not measured).
  double compute_ceiling_tok_s() const;

  double prefill_median() const;
  double decode_median() const;
  // (prompt + generated tokens) / whole request time, median: llama-bench's pg test.
  double pg_median() const;
};

enum class BenchFormat { kMarkdown, kJson, kJsonl, kCsv, kSql };
BenchFormat ParseBenchFormat(const std::string& s);  // throws UsageError

nlohmann::ordered_json ToJson(const BenchRecord& r);

// What a writer prints after its `rows` records: the json form's closing brackets, the Markdown
// form's footnote; nothing for the others.
std::string WriterEnd(BenchFormat f, size_t rows, const char* md_footnote);

// Renders records one at a time, so each can be printed as its point finishes: Begin() once,
// Row() per record, End() once; the concatenation is one valid document of the format (the
// Markdown table, one JSON document, JSONL lines, CSV with its header, SQL statements).
class BenchWriter {
 public:
  BenchWriter(BenchFormat format, SystemInfo system);
  std::string Begin() const;
  std::string Row(const BenchRecord& r);
  std::string End() const;

  // The SQL table `-o sql` creates and fills.
  static constexpr const char* kSqlTable = "needle_bench";

 private:
  BenchFormat format_;
  SystemInfo system_;
  size_t rows_ = 0;
};

// Renders all records (and the system once) in the chosen format: Begin + Rows + End.
std::string Render(const std::vector<BenchRecord>& records, const SystemInfo& sys, BenchFormat f);

}  // namespace needle::report
