// The session benchmark's record (`needle bench --session`): what a tool-calling user waits for,
// measured through the protocol as `needle run` and the C API run it. Per repetition: the load
// (open the file, the weight views), the init (a session for the tool list: tokenizer, prompt,
// grammar and the tools prefix's prefill), the same init with the prefix read from a persisted
// snapshot (the prefix cache), and one reply (the query's turn, decoded and checked, with the
// prefix ready). Rendered in the same formats as the token benchmark's records.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "report/bench_record.h"
#include "report/system.h"

namespace needle::report {

struct SessionBenchRecord {
  std::string engine = "needle";
  std::string model;         // path
  std::string model_sha256;  // of the whole file
  std::string isa, path;     // kernel table and numeric path
  int threads = 1;
  int repetitions = 0;
  int budget = 0;     // max new tokens of the reply
  std::string query;  // the user turn
  // Token counts (the same in every repetition: the protocol is deterministic); -1: not known.
  int prefix_tokens = 0;   // the tools prefix
  int turn_tokens = 0;     // the rendered user turn
  int reply_tokens = 0;    // committed tokens (the official return value)
  std::string reply_type;  // "call" or "respond"
  // Seconds, one sample per repetition (none: not measured, e.g. the official engine has no
  // prefix cache; its one load is one sample).
  std::vector<double> load_s, init_s, init_cached_s, reply_s;
  uint64_t peak_rss_bytes = 0;  // this point's peak (reset before it where the OS allows)
  uint64_t model_bytes = 0;
};

nlohmann::ordered_json ToJson(const SessionBenchRecord& r);

// Streams session records like BenchWriter: Begin(), Row() per record, End().
class SessionBenchWriter {
 public:
  SessionBenchWriter(BenchFormat format, SystemInfo system);
  std::string Begin() const;
  std::string Row(const SessionBenchRecord& r);
  std::string End() const;

  static constexpr const char* kSqlTable = "needle_bench_session";

 private:
  BenchFormat format_;
  SystemInfo system_;
  size_t rows_ = 0;
};

}  // namespace needle::report
