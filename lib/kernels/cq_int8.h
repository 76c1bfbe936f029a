// Integer CQ products (the official engine's arithmetic, NUMERICS.md §5.2), bit-exact: activations
// are rotated per 128-group by the unnormalized Walsh-Hadamard transform, scaled, quantized to int8
// with one f32 scale per group; codebook levels are int8 with one f32 scale per code width; each
// group's dot product is an exact int32; groups are accumulated in f32 in order:
//   acc = 0; for g in order: acc = norm_g * (cb_scale * (s_g * (float)I_g)) + acc
// The integer order inside a group is free (the sum is exact); the float order is not. Every ISA
// version must give the same bits as the scalar reference. Built with -ffp-contract=off.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/cq_matmul.h"

namespace needle::kernels {

// The official engine hard-codes the CQ group size.
inline constexpr size_t kI8Group = 128;

// int8 codebook of one code width (NUMERICS.md §3.1): level k = q[k] * scale.
struct I8Codebook {
  int8_t q[16] = {};  // indexed by the raw code (ternary: crumb map folded in, like CqMatrix)
  float scale = 1.f;  // c_b
};

// Quantized activations of n tokens for matrices with in_pad columns: q [n, in_pad] int8 in a
// layout private to the kernel table that made them (any permutation inside each 128-group), and
// scales [n, in_pad / 128]. Only the table that prepared them may consume them.
struct I8Acts {
  const int8_t* q = nullptr;
  const float* scales = nullptr;
  size_t n = 0, in_pad = 0;
};

// x [n, cols] (row stride ldx) -> q [n, in_pad], scales [n, in_pad/128] for code width
// `code_bits` (the layout may depend on it). Per group: zero-pad, unnormalized WHT (stages h = 1,
// 2,
// ..., 64), z_i = c_128 * v_i with c_128 = 1.0f / sqrtf(128.0f); s = amax/127 (1 if amax == 0);
// q_i = roundf(z_i * (1.0f / s)).
using CqQuantizeI8Fn = void (*)(const float* x, size_t n, size_t cols, size_t ldx, size_t in_pad,
                                uint32_t code_bits, int8_t* q, float* scales);

// y[t * ldy + (r - row_begin)] for rows [row_begin, row_end) of m and tokens t < acts.n, with the
// group accumulation above. m.group must be 128 and m.in_pad == acts.in_pad.
using CqGemmI8Fn = void (*)(const CqMatrix& m, const I8Codebook& cb, const I8Acts& acts,
                            size_t row_begin, size_t row_end, float* y, size_t ldy);

// Exact int32 dot product of two int8 vectors (any n).
using DotI8Fn = int32_t (*)(const int8_t* a, const int8_t* b, size_t n);
// out[t * ldo + r] = the exact int32 dot of row r of a (a + r * lda, n values) with vector t of x
// (x + t * ldx, n values), for r < rows and t < nx: int8 rows against a few shared vectors (the
// mHC's φ rows against the int8 streams of a block's tokens), which a SIMD version loads once for
// all of them. n < 2^16.
using DotI8RowsFn = void (*)(const int8_t* a, size_t lda, size_t rows, const int8_t* x, size_t ldx,
                             size_t nx, size_t n, int32_t* out, size_t ldo);

// A machine limit, not numerics: `rounds` rounds of independent accumulator chains of the table's
// int8 product instruction (vpdpbusd, vpmaddubsw + vpmaddwd, SDOT, ...) on register operands,
// with no memory traffic; returns the int8 multiply-adds done (rounds x the table's MACs per
// round). Timed by the caller, it gives one thread's int8 compute peak: needle bench's compute
// ceiling sets the CQ products of a token against it.
using MacPeakFn = uint64_t (*)(uint64_t rounds);

// Scalar references (plain layout: q in column order).
void CqQuantizeI8Reference(const float* x, size_t n, size_t cols, size_t ldx, size_t in_pad,
                           uint32_t code_bits, int8_t* q, float* scales);
void CqGemmI8Reference(const CqMatrix& m, const I8Codebook& cb, const I8Acts& acts,
                       size_t row_begin, size_t row_end, float* y, size_t ldy);
int32_t DotI8Reference(const int8_t* a, const int8_t* b, size_t n);
uint64_t MacPeakReference(uint64_t rounds);  // scalar int32 multiply-adds
void DotI8RowsReference(const int8_t* a, size_t lda, size_t rows, const int8_t* x, size_t ldx,
                        size_t nx, size_t n, int32_t* out, size_t ldo);
// The rows form of an ISA's single dot (for tables without their own rows kernel).
template <DotI8Fn kDot>
void DotI8RowsVia(const int8_t* a, size_t lda, size_t rows, const int8_t* x, size_t ldx, size_t nx,
                  size_t n, int32_t* out, size_t ldo) {
  for (size_t t = 0; t < nx; ++t)
    for (size_t r = 0; r < rows; ++r) out[t * ldo + r] = kDot(a + r * lda, x + t * ldx, n);
}

// The engine's int8 quantizer Q(v) over n values: s = amax/127 (f32 division; 1 if amax == 0),
// q_i = roundf(v_i * (1.0f / s)). Returns s.
float QuantizeI8(const float* v, size_t n, int8_t* q);

// The 128 inputs of group g of an activation row x of `cols` values: x + 128 g itself when the
// group is whole, else `padded` (128 floats) holding its values and zeros after them.
inline const float* I8GroupInput(const float* x, size_t cols, size_t g, float* padded) {
  const size_t base = g * kI8Group;
  const size_t len = base < cols ? std::min(kI8Group, cols - base) : 0;
  if (len == kI8Group) return x + base;
  for (size_t i = 0; i < kI8Group; ++i) padded[i] = i < len ? x[base + i] : 0.f;
  return padded;
}

// The byte tables of one 16-entry lookup per code nibble: for 2-bit codes a nibble holds two
// codes, first[n] = q[n & 3] and second[n] = q[n >> 2]; for 4-bit codes both are q[n].
inline void I8NibbleTables(const I8Codebook& cb, uint32_t code_bits, int8_t first[16],
                           int8_t second[16]) {
  for (size_t n = 0; n < 16; ++n) {
    first[n] = code_bits == 2 ? cb.q[n & 3] : cb.q[n];
    second[n] = code_bits == 2 ? cb.q[n >> 2] : cb.q[n];
  }
}

// 16-row tiles: a second copy of a matrix's codes and norms, in the order a kernel table's product
// reads them (CqTileLayout, cq_matmul.h: KernelTable::cq_i8_tiles names a table's layout,
// CqMatrix::tile_layout the one m.tiles holds; a product reads only tiles of its own layout). Tile
// t covers rows 16 t .. 16 t + 15; its block for group g starts at byte (t * groups_per_row + g) *
// CqTileBlockBytes(layout, bits): the group's code bytes of the 16 rows in the layout's order,
// then the 16 rows' group norms in row order.
//   kByteColumns (2-bit): 32 vectors of 16 bytes, vector k byte p = code byte 32 g + k of row
//     16 t + p (one 16-byte load holds the same code byte of 16 rows: a table lookup over 16
//     rows); the norms as f32 (F16ToF32 of the file's, exact): 576-byte blocks.
//   kRowDwords (2-bit and 4-bit): B / 4 vectors of 64 bytes for a row's B = 16 * bits code bytes
//     of the group, vector d byte 4 p + j = code byte B g + 4 d + j of row 16 t + p (row p's code
//     dword d in dword lane p: rows in lanes, no transpose); the norms as the file's f16 (one
//     32-byte load converts them): 544-byte blocks (2-bit), 1,056-byte blocks (4-bit).
constexpr size_t kCqTileRows = 16;
constexpr size_t kCqTileBlockBytes = kCqTileRows * (2 * kI8Group / 8 + sizeof(float));  // 576
constexpr size_t kCqRowDwordBlockBytes = kCqTileRows * (2 * kI8Group / 8 + 2);          // 544
constexpr size_t kCqRowDword4BlockBytes = kCqTileRows * (4 * kI8Group / 8 + 2);         // 1056
constexpr size_t CqTileBlockBytes(CqTileLayout layout, uint32_t bits = 2) {
  if (layout != CqTileLayout::kRowDwords) return kCqTileBlockBytes;
  return bits == 4 ? kCqRowDword4BlockBytes : kCqRowDwordBlockBytes;
}
// Bytes of m's tiles in `layout`; 0 when m has none or the layout is kNone. Tiled: matrices of
// 128-groups whose rows are a multiple of 16, 2-bit in either layout, 4-bit in kRowDwords.
size_t CqTileBytes(const CqMatrix& m, CqTileLayout layout);
// Writes m's tiles (CqTileBytes(m, layout) bytes) in `layout` (not kNone) to out.
void MakeCqTiles(const CqMatrix& m, CqTileLayout layout, uint8_t* out);
// "byte-columns", "row-dwords" (kNone: "none").
const char* CqTileLayoutName(CqTileLayout layout);

// Builds the int8 codebook of f32 levels (2^bits entries used): c = amax/127 (1 if 0),
// q[k] = roundf(levels[k] / c) (a division, as the engine's loader).
I8Codebook MakeI8Codebook(const float* levels, size_t count);

}  // namespace needle::kernels
