// `needle bench --official PKG_DIR`: comparison rows for the official engine (the WASM build in the
// npm package @tyler71/cactus-needle2), run with node through its C ABI on the same prompts.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "report/bench_record.h"
#include "report/session_record.h"

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

  // The session scenario (`bench --session`), per repetition in a fresh module instance:
  // needle_load (load), needle_init with `tools_json` and `system` (init), needle_complete(query,
  // budget) (reply), needle_init again (init_cached: the engine keeps the last prefix in memory).
  // The prefix and reply token counts are the calls' return values; the engine reports no turn
  // length (turn_tokens -1).
  report::SessionBenchRecord RunSession(const std::string& model_path,
                                        const std::string& model_sha256, uint64_t model_bytes,
                                        const std::string& tools_json, const std::string& system,
                                        const std::string& query, int budget, int repetitions,
                                        int warmup) const;

 private:
  struct ScriptArg {
    std::string value;
    bool as_file = false;  // written to a file, passed by path (texts)
  };
  std::vector<nlohmann::json> RunScript(const std::vector<ScriptArg>& args) const;
  std::string pkg_dir_;
};

}  // namespace needle::cli
