// Writes .cact v2 files in the exporter's exact layout (byte-identical round trips).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "format/cact.h"

namespace needle::format {

// One tensor to write; offsets are computed by the writer.
struct TensorRecord {
  DType dtype = DType::kF16;
  uint32_t ndim = 0;
  std::array<uint32_t, 4> shape{};
  uint32_t group = 0, bits = 0;   // CQ only
  std::span<const uint8_t> data;  // blob bytes (must match shape/dtype/group/bits)
};

// Record for an existing tensor of `file`, pointing at its bytes.
TensorRecord RecordOf(const CactFile& file, const TensorInfo& t);

// Serializes header (num_tensors and codebook_len are set from the arguments), codebooks,
// directory and 64-aligned blobs. The result is re-parsed by the caller if validation is wanted.
std::vector<uint8_t> SerializeCact(const Header& header, std::span<const float> codebooks,
                                   std::span<const TensorRecord> tensors);

// SerializeCact + validate by parsing + atomic write. Throws FormatError / IoError.
void WriteCact(const std::string& path, const Header& header, std::span<const float> codebooks,
               std::span<const TensorRecord> tensors, bool overwrite = true);

}  // namespace needle::format
