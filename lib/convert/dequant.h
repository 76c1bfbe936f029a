// .cact -> folder for training tools: weights.safetensors (F32, canonical names), config.json
// (geometry, kv settings, per-tensor dtype/bits/group, SHA-256s) and source.cact (a copy).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/cact.h"

namespace needle::convert {

inline constexpr const char* kWeightsFile = "weights.safetensors";
inline constexpr const char* kConfigFile = "config.json";
inline constexpr const char* kSourceFile = "source.cact";
inline constexpr int kDequantFolderVersion = 1;

// A numeric tensor widened to f32, row-major in its .cact shape (CQ: dequantized with the file's
// codebooks; FP16: widened exactly). Throws for RAW.
std::vector<float> TensorToF32(const format::CactFile& file, const format::TensorInfo& t);

struct DequantOptions {
  bool force = false;    // replace an existing OUT_DIR
  bool progress = true;  // progress bar (only drawn on a terminal)
};

struct DequantSummary {
  uint64_t tensors = 0;            // written to the safetensors file
  uint64_t safetensors_bytes = 0;  // size of weights.safetensors
  std::string source_sha256;
};

// Writes OUT_DIR through a temporary sibling folder renamed at the end. Refuses an existing
// OUT_DIR unless options.force. Throws IoError / FormatError.
DequantSummary Dequant(const std::string& model_path, const std::string& out_dir,
                       const DequantOptions& options);

}  // namespace needle::convert
