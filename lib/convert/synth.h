// Random-weight Needle 2 models for tests and benchmarks: any geometry, deterministic per seed,
// quantized like the exporter (CQ group 128, bits from a bits map), probe heads, a real tokenizer.
#pragma once

#include <cstdint>
#include <string>

#include "convert/bits_map.h"
#include "format/layout.h"

namespace needle::convert {

// The official Needle 2 geometry (FORMAT.md header table).
format::Geometry OfficialGeometry();

// Fills derived fields (hada_n = smallest power of two >= d_model) and validates the geometry
// the way the .cact reader would; throws UsageError naming the bad value.
void FinishGeometry(format::Geometry* g);

struct SynthOptions {
  std::string like;           // model whose tokenizer blob is copied (its vocab is used)
  format::Geometry geometry;  // vocab is overwritten with the tokenizer's piece count
  uint64_t seed = 0;
  BitsMap bits = BitsMap::Parse(kDefaultScheme);
  uint32_t group = 128;
  bool heads = true;  // contrastive (P=4, out=128) and confidence (P=8, out=1) heads
  bool force = false;
  bool progress = true;
};

struct SynthSummary {
  uint64_t tensors = 0;
  uint64_t file_bytes = 0;
};

// Writes the model atomically. Same options and seed -> byte-identical file.
SynthSummary Synth(const std::string& out_path, const SynthOptions& options);

}  // namespace needle::convert
