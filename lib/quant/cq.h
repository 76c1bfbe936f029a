// CQ (codebook-quantized) codec: Hadamard-rotated groups, L2 norm per group, nearest codebook
// entry per element (spec: FORMAT.md "CQ blob"). Model-agnostic; no file IO.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace needle::quant {

inline constexpr uint32_t kTernaryBits = 5;        // record-bits value meaning ternary
inline constexpr double kTernaryLevel = 1.2240064;  // ternary levels {-c, 0, +c} / sqrt(g)

// Parameters of one CQ matrix [rows, cols].
struct CqParams {
  uint64_t rows = 0, cols = 0;
  uint32_t group = 128;      // power of two
  uint32_t record_bits = 2;  // 2, 3, 4, or 5 = ternary (stored as 2-bit crumbs)

  uint64_t in_pad() const { return (cols + group - 1) / group * group; }
  uint32_t code_bits() const { return record_bits == kTernaryBits ? 2 : record_bits; }
  uint64_t row_bytes() const { return in_pad() * code_bits() / 8; }
  uint64_t groups_per_row() const { return in_pad() / group; }
  uint64_t code_bytes() const { return rows * row_bytes(); }
  uint64_t norm_bytes() const { return rows * groups_per_row() * 2; }
  uint64_t blob_bytes() const { return code_bytes() + norm_bytes(); }
};

// The dequantization levels for one matrix: for bits 2/3/4 the file's codebook (already divided
// by sqrt(group)); for ternary {-c, 0, +c}/sqrt(group) indexed by trit 0, 1, 2.
// `file_codebooks` is the file's 28 values (cb2 | cb3 | cb4).
std::vector<float> Levels(std::span<const float> file_codebooks, uint32_t record_bits,
                          uint32_t group);

// Packs `codes` (one per element, values < 2^code_bits; for ternary the trit index 0/1/2) of one
// row into LSB-first bit streams: code k occupies bits [k*b, (k+1)*b). Ternary trits are stored
// as crumbs 3, 0, 1 for trit 0, 1, 2. `out` has in_pad*code_bits/8 bytes.
void PackRow(std::span<const uint8_t> codes, uint32_t record_bits, std::span<uint8_t> out);
// Inverse of PackRow: returns trit index (0/1/2) for ternary, code for 2/3/4.
void UnpackRow(std::span<const uint8_t> packed, uint32_t record_bits, std::span<uint8_t> codes);

// Quantizes a row-major [rows, cols] f32 matrix into a CQ blob (codes for all rows, then the f16
// norms). `levels` from Levels(). Deterministic; ties go to the lower index.
std::vector<uint8_t> Quantize(std::span<const float> weights, const CqParams& p,
                              std::span<const float> levels);

// Dequantizes a whole CQ blob into a row-major [rows, cols] f32 matrix (cropped to cols).
std::vector<float> Dequantize(std::span<const uint8_t> blob, const CqParams& p,
                              std::span<const float> levels);
// Dequantizes rows [row, row+1) into out (cols values). For embedding lookups.
void DequantizeRow(std::span<const uint8_t> blob, const CqParams& p, std::span<const float> levels,
                   uint64_t row, std::span<float> out);

}  // namespace needle::quant
