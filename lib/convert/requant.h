// Folder written by `needle dequant` (possibly edited) -> .cact. Unchanged tensors keep their
// original bytes from source.cact; changed ones are re-encoded (CQ with the original or the
// bits-map width, FP16/FP32 converted back). Header, codebooks and tokenizer come from source.cact.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "convert/bits_map.h"

namespace needle::convert {

struct RequantOptions {
  std::optional<BitsMap> bits_map;  // width for re-encoded CQ tensors; a CQ tensor whose mapped
                                    // width differs from its original is re-encoded too
  bool force = false;               // replace an existing output file
  bool progress = true;
};

struct RequantSummary {
  uint64_t kept = 0;                   // tensors copied byte for byte
  std::vector<std::string> reencoded;  // names of tensors re-encoded
  uint64_t file_bytes = 0;
};

// Validates everything before writing: a missing file, corrupt safetensors or config, a missing,
// unknown, misshapen or non-F32 tensor, NaN/Inf, or FP16 overflow throws an error naming the
// tensor, and nothing is written. Output is atomic (temp file + rename).
RequantSummary Requant(const std::string& in_dir, const std::string& out_path,
                       const RequantOptions& options);

}  // namespace needle::convert
