// Shared helpers of the libFuzzer targets (scripts/fuzz.sh): fixture paths and the rule that the
// library's typed errors (base/error.h) are expected results, never crashes.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "base/error.h"
#include "format/layout.h"
#include "model/decoder.h"

#ifndef NEEDLE_TEST_DATA
#error "NEEDLE_TEST_DATA must name tests/data"
#endif

namespace needle::fuzz {

inline std::string DataPath(const std::string& rel) {
  return std::string(NEEDLE_TEST_DATA) + "/" + rel;
}

inline std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "fuzz: cannot read %s\n", path.c_str());
    std::abort();
  }
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs f(); a needle::Error (IoError, FormatError, InvalidInput, UsageError) is a rejected input.
// Anything else escapes and libFuzzer reports it as a crash.
template <class F>
void ExpectErrors(F&& f) {
  try {
    f();
  } catch (const needle::Error&) {
  }
}

// fuzz_prefix_snapshot: the key its files are written with, and the decoder they belong to (the
// tiny model, official numerics, a window with 4 pinned positions, as a session's prefix).
inline constexpr const char* kSnapshotKey = "fuzz prefix snapshot";
inline model::DecoderConfig SnapshotDecoderConfig(const format::Geometry& g) {
  model::DecoderConfig c;
  c.kv_window = g.kv_window;
  c.sink_len = g.kv_window ? 4 : 0;
  c.max_positions = g.max_seq_len;
  c.pool_heads = true;
  return c;
}

}  // namespace needle::fuzz
