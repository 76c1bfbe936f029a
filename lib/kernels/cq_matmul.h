// Products with CQ (codebook-quantized) matrices computed on the codes: activations are rotated
// once per group by the normalized Walsh-Hadamard transform, then every output row is a sum over
// groups of norm * dot(levels[code], x_hat). No dense weights are ever formed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace needle::kernels {

// A read-only view of one CQ matrix [rows, cols] (layout: FORMAT.md "CQ blob"). Model-agnostic:
// the caller fills it from whatever container holds the bytes.
// The layout of a matrix's optional 16-row tiles (cq_int8.h).
enum class CqTileLayout : uint8_t { kNone, kByteColumns, kRowDwords };

struct CqMatrix {
  size_t rows = 0, cols = 0;
  size_t group = 0;                // power of two
  size_t in_pad = 0;               // ceil(cols / group) * group
  size_t groups_per_row = 0;       // in_pad / group
  size_t row_bytes = 0;            // in_pad * code_bits / 8
  uint32_t code_bits = 0;          // 2, 3 or 4 (ternary matrices use 2-bit crumbs)
  bool ternary = false;            // 2-bit crumbs of a ternary tensor (levels below)
  const uint8_t* codes = nullptr;  // [rows, row_bytes], LSB-first bit stream per row
  const uint8_t* norms = nullptr;  // [rows, groups_per_row] f16 little-endian, maybe unaligned
  // Optional second copy of codes and norms in 16-row tiles (cq_int8.h, MakeCqTiles) for tables
  // whose integer product reads it (KernelTable::cq_i8_tiles), in the layout tile_layout (a
  // product reads only tiles of its own layout); codes and norms stay valid.
  const uint8_t* tiles = nullptr;
  CqTileLayout tile_layout = CqTileLayout::kNone;
  // Level of each raw code value (2^code_bits entries used). For ternary the crumb -> level map
  // is folded in here (crumb 3 -> -c, 0 -> 0, 1 -> +c, 2 unused = 0).
  float levels[16] = {};
};

// Raw code k (0-based column in the padded row) of a row's bit stream.
inline uint32_t CqCodeAt(const uint8_t* row_codes, size_t k, uint32_t bits) {
  const size_t bit = k * bits;
  const size_t byte = bit >> 3;
  const uint32_t shift = static_cast<uint32_t>(bit & 7);
  uint32_t v = row_codes[byte] >> shift;
  if (shift + bits > 8) v |= static_cast<uint32_t>(row_codes[byte + 1]) << (8 - shift);
  return v & ((1u << bits) - 1);
}

// x [n, cols] (row stride ldx) -> x_hat [n, in_pad] (row stride in_pad): zero-pad each row to
// in_pad and apply the normalized FWHT to every group of `group` values.
void CqTransformActivations(const float* x, size_t n, size_t cols, size_t ldx, size_t group,
                            size_t in_pad, float* x_hat);

// Decodes row r of m into out (cols values): (levels[code] * norm) @ H per group, cropped; from
// m's tiles when it has them. `scratch` holds in_pad floats.
void CqDecodeRow(const CqMatrix& m, size_t r, float* out, float* scratch);

// y[t][r - row_begin] = dot(row r, x[t]) for rows [row_begin, row_end) and tokens t < n, from
// transformed activations x_hat [n, in_pad]; y has row stride ldy. One pass over the rows' codes
// for all n tokens. Summation order of the reference (what faster versions are measured against):
// for each group a running sum over its elements in order, then acc += norm * sum, groups in order.
using CqGemmFn = void (*)(const CqMatrix& m, const float* x_hat, size_t n, size_t row_begin,
                          size_t row_end, float* y, size_t ldy);

void CqGemmReference(const CqMatrix& m, const float* x_hat, size_t n, size_t row_begin,
                     size_t row_end, float* y, size_t ldy);
#if defined(NEEDLE_X86)
// Requires AVX2 + FMA + F16C (checked by the dispatcher); any group (falls back to the
// reference for groups that are not a multiple of 8).
void CqGemmAvx2(const CqMatrix& m, const float* x_hat, size_t n, size_t row_begin, size_t row_end,
                float* y, size_t ldy);
// Requires AVX-512 F/BW/VL/DQ plus the AVX2 set (checked by the dispatcher); groups that are not
// a multiple of 16 take the AVX2 path.
void CqGemmAvx512(const CqMatrix& m, const float* x_hat, size_t n, size_t row_begin, size_t row_end,
                  float* y, size_t ldy);
#endif

}  // namespace needle::kernels
