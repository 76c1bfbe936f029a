// CQ (codebook-quantized) codec: Hadamard-rotated groups, L2 norm per group, nearest codebook
// entry per element (spec: FORMAT.md "CQ blob"). Model-agnostic; no file IO.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace needle::quant {

inline constexpr uint32_t kTernaryBits = 5;         // record-bits value meaning ternary
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

// Throws InvalidInput unless group is a power of two, record_bits is 2, 3, 4 or 5, and a row's
// codes fill whole bytes (in_pad * code_bits % 8 == 0; always true for group >= 8).
void CheckParams(const CqParams& p);

// The Walsh-Hadamard scale 1/sqrt(g) as upstream rounds it: f32(1) / f32(sqrt(g)) (for powers
// of two this equals f32(1 / sqrt(g)), so numpy 1.x and 2.x casting rules agree).
float HadamardScale(uint32_t group);

// r = x @ H for one group of g values (H as in FORMAT.md), each r[j] summed over k = 0..g-1 in
// order in f32 (no FMA), which is how the upstream f32 matmul rounds: Quantize and Dequantize
// use it so they match upstream bit for bit. O(g^2); fast code uses kernels::Fwht instead.
void RotateGroupExact(const float* x, uint32_t group, float* out);

// The dequantization levels for one matrix: for bits 2/3/4 the file's codebook (already divided
// by sqrt(group)); for ternary {-c, 0, +c}/sqrt(group) indexed by trit 0, 1, 2.
// `file_codebooks` is the file's 28 values (cb2 | cb3 | cb4).
std::vector<float> Levels(std::span<const float> file_codebooks, uint32_t record_bits,
                          uint32_t group);

// Index of the nearest level to u in sorted `levels` (searchsorted, then the closer neighbour;
// an exact tie goes to the lower index), in f32 as upstream.
uint8_t NearestLevel(std::span<const float> levels, float u);

// Packs `codes` (one per element, values < 2^code_bits; for ternary the trit index 0/1/2) of one
// row into LSB-first bit streams: code k occupies bits [k*b, (k+1)*b). Ternary trits are stored
// as crumbs 3, 0, 1 for trit 0, 1, 2. `out` has in_pad*code_bits/8 bytes.
void PackRow(std::span<const uint8_t> codes, uint32_t record_bits, std::span<uint8_t> out);
// Inverse of PackRow: returns trit index (0/1/2) for ternary, code for 2/3/4. The unused
// ternary crumb 2 decodes to 3 (out of range; Dequantize rejects it).
void UnpackRow(std::span<const uint8_t> packed, uint32_t record_bits, std::span<uint8_t> codes);

// Quantizes a row-major [rows, cols] f32 matrix into a CQ blob (codes for all rows, then the f16
// norms). `levels` from Levels(). Deterministic; ties go to the lower index. Bit-identical to
// upstream's exporter. Throws InvalidInput on bad sizes or a non-finite weight.
std::vector<uint8_t> Quantize(std::span<const float> weights, const CqParams& p,
                              std::span<const float> levels);

// Dequantizes a whole CQ blob into a row-major [rows, cols] f32 matrix (cropped to cols),
// bit-identical to upstream's reader. Throws InvalidInput on bad sizes, FormatError on a code
// outside the levels (ternary crumb 2).
std::vector<float> Dequantize(std::span<const uint8_t> blob, const CqParams& p,
                              std::span<const float> levels);
// Dequantizes row `row` into out (cols values), as Dequantize. For embedding lookups: no
// allocation for group <= 1024; throws like Dequantize (and on row >= rows).
void DequantizeRow(std::span<const uint8_t> blob, const CqParams& p, std::span<const float> levels,
                   uint64_t row, std::span<float> out);

}  // namespace needle::quant
