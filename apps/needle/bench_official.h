// `needle bench --official PKG_DIR`: comparison rows for the official engine (the WASM build in the
// npm package @tyler71/cactus-needle2), run with node through its C ABI on the same prompts.
#pragma once

#include <cstdint>
#include <string>

#include "report/bench_record.h"

namespace needle::cli {

class OfficialBench {
 public:
  // Checks that `node` is on PATH and that PKG_DIR holds vendor/wasm/needle.js and needle.wasm;
  // UsageError naming what is missing otherwise.
  explicit OfficialBench(std::string pkg_dir);

  // Loads `model_path` into a fresh engine and answers `query` (a user turn, no tools) with a
  // budget of `gen_tokens`, warmup + repetitions times. The record holds the engine's own
  // prefill_tps / decode_tps per repetition and the wall time of each turn (total_s); isa "wasm",
  // one thread. The engine reports no first-token or tokenizing time (left empty).
  report::BenchRecord Run(const std::string& model_path, const std::string& model_sha256,
                          uint64_t model_bytes, const std::string& query, int prompt_tokens,
                          int gen_tokens, int repetitions, int warmup) const;

 private:
  std::string pkg_dir_;
};

}  // namespace needle::cli
