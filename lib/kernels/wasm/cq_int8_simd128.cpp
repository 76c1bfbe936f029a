// WASM SIMD128 integer CQ kernels (cq_int8.h): the activation quantizer, gemv / gemm and int8 dot.
// Bit-exact with the scalar references (cq_int8.cpp): the quantizer performs the reference's float
// operations on every element, 4 at a time; the group dots are exact int32 (int8 values as int16,
// multiplied and pair-summed by i32x4.dot_i16x8_s); each output's f32 chain runs over the groups
// in order:
//   acc = norm_g * (cb_scale * (s_g * (float)I_g)) + acc
// Built with -ffp-contract=off (and wasm has no fused multiply-add anyway).
//
// Activations use the x86 layout (I8LayoutPositionX86), so one 16-byte block of positions is what
// one i8x16.swizzle of shifted / masked code bytes yields:
//   2-bit: block 2j + h = crumb j of code bytes 16h..16h+15
//   4-bit: block o < 4  = low nibbles of code bytes 16o..16o+15, block 4 + o their high nibbles
//   3-bit: block o < 4  = codes 0..3 of chunks 4o..4o+3 (3 bytes each), block 4 + o codes 4..7
#include <wasm_simd128.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cq_int8.h"
#include "kernels/lane_algorithms.h"
#include "kernels/wasm/kernels_wasm.h"
#include "kernels/wasm/simd128_common.h"

namespace needle::kernels {

namespace {

using simd128::Load;
using simd128::LowBytes16;
using simd128::ReduceLanes4;
using simd128::RoundToI32;
using simd128::SplitDot;
using simd128::Store;
using simd128::WidenSplit;

constexpr size_t kBlocks = kI8Group / 16;  // 16-byte blocks per group
// Groups whose int16 activations are staged at a time: gemv (one token), gemm (a tile of tokens).
// Longer rows are walked in blocks, the chains resumed from y (an f32 store and reload is exact).
constexpr size_t kGemvGroupBlock = 64;
constexpr size_t kGemmGroupBlock = 16;

// ---- quantizers ----

// 128 int8 in column order (eight 16-byte vectors) -> the layout of I8LayoutPositionX86.
void StoreLayout(uint32_t code_bits, const v128_t* c, int8_t* dst) {
  v128_t out[kBlocks];
  if (code_bits == 2) {
    // Position 32 j + 16 h + b holds column 64 h + 4 b + j: a 4x4 byte transpose in each vector
    // (dword j = its crumb-j columns), then a 4x4 dword transpose over the four vectors of half h.
    for (size_t h = 0; h < 2; ++h) {
      v128_t t[4];
      for (size_t i = 0; i < 4; ++i)
        t[i] = wasm_i8x16_shuffle(c[4 * h + i], c[4 * h + i], 0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10,
                                  14, 3, 7, 11, 15);
      const v128_t u0 = wasm_i32x4_shuffle(t[0], t[1], 0, 4, 1, 5);
      const v128_t u1 = wasm_i32x4_shuffle(t[0], t[1], 2, 6, 3, 7);
      const v128_t u2 = wasm_i32x4_shuffle(t[2], t[3], 0, 4, 1, 5);
      const v128_t u3 = wasm_i32x4_shuffle(t[2], t[3], 2, 6, 3, 7);
      out[0 + h] = wasm_i64x2_shuffle(u0, u2, 0, 2);
      out[2 + h] = wasm_i64x2_shuffle(u0, u2, 1, 3);
      out[4 + h] = wasm_i64x2_shuffle(u1, u3, 0, 2);
      out[6 + h] = wasm_i64x2_shuffle(u1, u3, 1, 3);
    }
  } else if (code_bits == 3) {
    for (size_t o = 0; o < 4; ++o) {
      out[o] = wasm_i8x16_shuffle(c[2 * o], c[2 * o + 1], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19,
                                  24, 25, 26, 27);
      out[4 + o] = wasm_i8x16_shuffle(c[2 * o], c[2 * o + 1], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21,
                                      22, 23, 28, 29, 30, 31);
    }
  } else {
    for (size_t o = 0; o < 4; ++o) {
      out[o] = wasm_i8x16_shuffle(c[2 * o], c[2 * o + 1], 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22,
                                  24, 26, 28, 30);
      out[4 + o] = wasm_i8x16_shuffle(c[2 * o], c[2 * o + 1], 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21,
                                      23, 25, 27, 29, 31);
    }
  }
  for (size_t o = 0; o < kBlocks; ++o) Store(dst + 16 * o, out[o]);
}

// ---- gemv / gemm ----

// 16 f16 values (u16 lanes zero-extended to u32) -> f32, exactly as F16ToF32: the magnitude bits
// moved to the f32 position and scaled by 2^112 (exact for normal and subnormal halves), the
// all-ones exponent (infinity / NaN, payload kept) set directly, then the sign.
inline v128_t HalfToFloat(v128_t h) {
  const v128_t sign = wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x8000)), 16);
  const v128_t magnitude = wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x7fff)), 13);
  const v128_t scaled = wasm_f32x4_mul(magnitude, wasm_f32x4_splat(0x1p112f));
  const v128_t special =
      wasm_i32x4_eq(wasm_v128_and(h, wasm_i32x4_splat(0x7c00)), wasm_i32x4_splat(0x7c00));
  const v128_t big = wasm_v128_or(magnitude, wasm_i32x4_splat(0x7f800000));
  return wasm_v128_or(wasm_v128_bitselect(big, scaled, special), sign);
}

// count (<= 4) little-endian f16 at p -> f32 lanes 0..count-1 (the others 0).
inline v128_t LoadHalves(const uint8_t* p, size_t count) {
  if (count == 4) return HalfToFloat(wasm_u32x4_extend_low_u16x8(wasm_v128_load64_zero(p)));
  uint16_t h[4] = {};
  for (size_t i = 0; i < count; ++i) std::memcpy(&h[i], p + 2 * i, 2);
  return HalfToFloat(wasm_u32x4_make(h[0], h[1], h[2], h[3]));
}

// The first `count` (<= 4) lanes of v to / from p (constant-size copies: a variable-size memcpy is
// a call in wasm).
inline void StorePartial(float* p, v128_t v, size_t count) {
  if (count == 4) return Store(p, v);
  alignas(16) float f[4];
  Store(f, v);
  for (size_t i = 0; i < count; ++i) p[i] = f[i];
}
inline v128_t LoadPartial(const float* p, size_t count) {
  if (count == 4) return Load(p);
  alignas(16) float f[4] = {};
  for (size_t i = 0; i < count; ++i) f[i] = p[i];
  return Load(f);
}

// A group's 128 int8 weights in layout order (kBlocks vectors) from its 16 * kBits code bytes.
template <uint32_t kBits>
class Unpacker {
 public:
  explicit Unpacker(const I8Codebook& cb) {
    alignas(16) int8_t lo[16], hi[16];
    I8NibbleTables(cb, kBits, lo, hi);
    lo_ = Load(lo);
    hi_ = Load(hi);
  }

  // (Nibbles come from 16-bit shifts and a mask: u8x16.shr has no x86 instruction of its own.)
  __attribute__((always_inline)) inline void Group(const uint8_t* codes, v128_t* w) const {
    const v128_t nibble = wasm_i8x16_splat(15);
    if constexpr (kBits == 2) {
      for (size_t h = 0; h < 2; ++h) {
        const v128_t c = Load(codes + 16 * h);
        const v128_t low = wasm_v128_and(c, nibble);
        const v128_t high = wasm_v128_and(wasm_u16x8_shr(c, 4), nibble);
        w[0 + h] = wasm_i8x16_swizzle(lo_, low);
        w[2 + h] = wasm_i8x16_swizzle(hi_, low);
        w[4 + h] = wasm_i8x16_swizzle(lo_, high);
        w[6 + h] = wasm_i8x16_swizzle(hi_, high);
      }
    } else if constexpr (kBits == 4) {
      for (size_t o = 0; o < 4; ++o) {
        const v128_t c = Load(codes + 16 * o);
        w[o] = wasm_i8x16_swizzle(lo_, wasm_v128_and(c, nibble));
        w[4 + o] = wasm_i8x16_swizzle(lo_, wasm_v128_and(wasm_u16x8_shr(c, 4), nibble));
      }
    } else {
      // Chunks 4o..4o+3 are bytes 12o..12o+11; the last block is loaded 4 bytes early so nothing
      // past the group is read. Chunk m -> dword m (swizzle index 16: a zero byte).
      for (size_t o = 0; o < 4; ++o) {
        const size_t start = o < 3 ? 12 * o : 32;
        const v128_t bytes = Load(codes + start);
        const auto s = static_cast<int8_t>(12 * o - start);
        const v128_t index = wasm_i8x16_make(
            s, static_cast<int8_t>(s + 1), static_cast<int8_t>(s + 2), 16,
            static_cast<int8_t>(s + 3), static_cast<int8_t>(s + 4), static_cast<int8_t>(s + 5), 16,
            static_cast<int8_t>(s + 6), static_cast<int8_t>(s + 7), static_cast<int8_t>(s + 8), 16,
            static_cast<int8_t>(s + 9), static_cast<int8_t>(s + 10), static_cast<int8_t>(s + 11),
            16);
        const v128_t chunks = wasm_i8x16_swizzle(bytes, index);
        w[o] = wasm_i8x16_swizzle(lo_, Spread3(chunks));
        w[4 + o] = wasm_i8x16_swizzle(lo_, Spread3(wasm_u32x4_shr(chunks, 12)));
      }
    }
  }

 private:
  // Four 3-bit fields at bits 0, 3, 6, 9 of every dword -> bytes 0..3 of that dword.
  static v128_t Spread3(v128_t v) {
    v128_t r = wasm_v128_and(v, wasm_i32x4_splat(0x7));
    r = wasm_v128_or(r, wasm_v128_and(wasm_i32x4_shl(v, 5), wasm_i32x4_splat(0x700)));
    r = wasm_v128_or(r, wasm_v128_and(wasm_i32x4_shl(v, 10), wasm_i32x4_splat(0x70000)));
    return wasm_v128_or(r, wasm_v128_and(wasm_i32x4_shl(v, 15), wasm_i32x4_splat(0x7000000)));
  }

  v128_t lo_, hi_;
};

struct GemmArgs {
  const CqMatrix* m;
  const I8Acts* acts;
  float cb_scale;
  size_t row_begin;
  float* y;
  size_t ldy;
};

// ---- gemv: one token; per block of four rows, each row's group dots one row at a time (so its
// weights and the activations it reads fit the registers), then the four chains side by side
// (lane = row) ----

constexpr size_t kRows = 4;

// Rows [r0, r0 + rows) (rows <= 4; missing rows repeat the last one and are not stored), groups
// [g0, g1) of their chains (resumed from y when g0 > 0); a16 holds the WidenSplit activations of
// groups [g0, g1).
template <uint32_t kBits>
void GemvTile(const Unpacker<kBits>& unpack, const GemmArgs& a, const int16_t* a16, size_t g0,
              size_t g1, size_t r0, size_t rows) {
  const CqMatrix& m = *a.m;
  const size_t G = m.groups_per_row;
  alignas(16) float norms[kGemvGroupBlock][kRows];
  v128_t dots[kGemvGroupBlock][kRows];  // 256 * each row's group dot, in 4 partial sums
  for (size_t r = 0; r < kRows; ++r) {
    const size_t row = r0 + std::min(r, rows - 1);
    const uint8_t* codes = m.codes + row * m.row_bytes;
    for (size_t g = g0; g < g1; ++g) {
      v128_t w[kBlocks];
      unpack.Group(codes + g * 16 * kBits, w);
      const int16_t* ag = a16 + (g - g0) * kI8Group;
      v128_t acc = wasm_i32x4_splat(0);
      for (size_t o = 0; o < kBlocks; ++o) acc = SplitDot(acc, w[o], ag + 16 * o);
      dots[g - g0][r] = acc;
    }
    const uint8_t* row_norms = m.norms + (row * G + g0) * 2;
    for (size_t g = g0; g < g1; g += 4) {
      alignas(16) float f[4];
      Store(f, LoadHalves(row_norms + 2 * (g - g0), std::min<size_t>(4, g1 - g)));
      for (size_t i = 0; i < 4 && g + i < g1; ++i) norms[g - g0 + i][r] = f[i];
    }
  }
  float* y = a.y + (r0 - a.row_begin);
  v128_t acc = g0 > 0 ? LoadPartial(y, rows) : wasm_f32x4_splat(0.f);
  const v128_t cb = wasm_f32x4_splat(a.cb_scale);
  const float* scales = a.acts->scales;
  for (size_t g = g0; g < g1; ++g) {
    const v128_t* d = dots[g - g0];
    const v128_t dot =
        wasm_f32x4_convert_i32x4(wasm_i32x4_shr(ReduceLanes4(d[0], d[1], d[2], d[3]), 8));
    const v128_t s = wasm_f32x4_splat(scales[g]);
    acc = wasm_f32x4_add(
        wasm_f32x4_mul(Load(norms[g - g0]), wasm_f32x4_mul(cb, wasm_f32x4_mul(s, dot))), acc);
  }
  StorePartial(y, acc, rows);
}

// (The three drivers stay separate functions: one profile entry each.)
template <uint32_t kBits>
__attribute__((noinline)) void GemvBits(const CqMatrix& m, const I8Codebook& cb, const I8Acts& acts,
                                        size_t row_begin, size_t row_end, float* y) {
  const Unpacker<kBits> unpack(cb);
  const GemmArgs a{&m, &acts, cb.scale, row_begin, y, 1};
  const size_t groups = m.groups_per_row;
  alignas(16) int16_t a16[kGemvGroupBlock * kI8Group];
  for (size_t g0 = 0; g0 < groups; g0 += kGemvGroupBlock) {
    const size_t g1 = std::min(groups, g0 + kGemvGroupBlock);
    WidenSplit(acts.q + g0 * kI8Group, (g1 - g0) * kI8Group, a16);
    for (size_t r0 = row_begin; r0 < row_end; r0 += kRows)
      GemvTile<kBits>(unpack, a, a16, g0, g1, r0, std::min(kRows, row_end - r0));
  }
}

// ---- 2-bit gemv by table lookup (T-MAC style): a code byte holds the codes of columns 4k..4k+3,
// each nibble a column pair. For one token, a table per pair holds its 16 possible products
// T[n] = q[n & 3] * a0 + q[n >> 2] * a1 (|T| <= 2 * 127 * 127 < 2^15), as its low bytes and its
// high bytes + 128 (both unsigned). 16 rows go at a time, as vectors holding one code byte of
// each row (byte p: row p), read from the matrix's 16-row tiles (cq_int8.h) or transposed from
// its rows; one i8x16.swizzle per table half gives a nibble's products for all 16 rows. The
// bytes are summed in 16-bit lanes, each lane holding two rows (its low byte row 2j, its high
// byte row 2j + 1): one sum of the whole lanes (mod 2^16) and one of their high bytes, from which
// the low bytes' sum is recovered exactly (a group's 64 pairs sum to < 2^15 per row).
// Then I = 256 * (sum of high bytes - 64 * 128) + sum of low bytes, exactly the group dot. ----

constexpr size_t kLutRows = kCqTileRows;
constexpr size_t kLutGroups = 16;                     // groups whose tables are built at a time
constexpr size_t kPairTables = 2 * kI8Group;          // vectors per group: 64 pairs x {low, high}
constexpr size_t kLutCodeVectors = 2 * kI8Group / 8;  // code bytes of a row's group

// The tables of one group of activations a (I8LayoutPositionWasm order: column 4k + j at 32 j + k),
// vector 2 (2k + h) + {0: low bytes, 1: high bytes + 128} for the pair of columns 4k + 2h and
// 4k + 2h + 1 (nibble h of code byte k).
void BuildPairTables(const I8Codebook& cb, const int8_t* a, v128_t* tables) {
  alignas(16) int16_t a16[kI8Group];
  for (size_t i = 0; i < kI8Group; i += 16) {
    const v128_t x = Load(a + i);
    Store(a16 + i, wasm_i16x8_extend_low_i8x16(x));
    Store(a16 + i + 8, wasm_i16x8_extend_high_i8x16(x));
  }
  const int16_t q0 = cb.q[0], q1 = cb.q[1], q2 = cb.q[2], q3 = cb.q[3];
  // Entries n = 0..7 and 8..15: the first code n & 3, the second n >> 2.
  const v128_t first = wasm_i16x8_make(q0, q1, q2, q3, q0, q1, q2, q3);
  const v128_t second_lo = wasm_i16x8_make(q0, q0, q0, q0, q1, q1, q1, q1);
  const v128_t second_hi = wasm_i16x8_make(q2, q2, q2, q2, q3, q3, q3, q3);
  const v128_t low_byte = wasm_i16x8_splat(0xff);
  const v128_t bias = wasm_i8x16_splat(static_cast<int8_t>(0x80));
  for (size_t k = 0; k < 32; ++k) {
    for (size_t h = 0; h < 2; ++h) {
      const v128_t a0 = wasm_v128_load16_splat(a16 + 64 * h + k);
      const v128_t a1 = wasm_v128_load16_splat(a16 + 64 * h + 32 + k);
      const v128_t p0 = wasm_i16x8_mul(first, a0);
      const v128_t t_lo = wasm_i16x8_add(p0, wasm_i16x8_mul(second_lo, a1));
      const v128_t t_hi = wasm_i16x8_add(p0, wasm_i16x8_mul(second_hi, a1));
      v128_t* t = tables + 2 * (2 * k + h);
      t[0] = wasm_u8x16_narrow_i16x8(wasm_v128_and(t_lo, low_byte), wasm_v128_and(t_hi, low_byte));
      t[1] = wasm_v128_xor(
          wasm_i8x16_narrow_i16x8(wasm_i16x8_shr(t_lo, 8), wasm_i16x8_shr(t_hi, 8)), bias);
    }
  }
}

// 16 vectors of 16 bytes -> their transpose, in place: v[k] byte p = old v[p] byte k (four rounds
// of byte interleaves of v[i] and v[i + 8]).
inline void Transpose16(v128_t* v) {
  for (size_t round = 0; round < 4; ++round) {
    v128_t t[16];
    for (size_t i = 0; i < 8; ++i) {
      t[2 * i] = wasm_i8x16_shuffle(v[i], v[i + 8], 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22,
                                    7, 23);
      t[2 * i + 1] = wasm_i8x16_shuffle(v[i], v[i + 8], 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13,
                                        29, 14, 30, 15, 31);
    }
    for (size_t i = 0; i < 16; ++i) v[i] = t[i];
  }
}

// Where LutTile finds a group of its 16 rows: the block of the matrix's tiles.
struct TileSource {
  const uint8_t* tile;  // the tile's block of group 0
  const v128_t* Codes(size_t g, v128_t* /*scratch*/) const {
    return reinterpret_cast<const v128_t*>(tile + g * kCqTileBlockBytes);
  }
  const float* Norms(size_t g, float* /*scratch*/) const {
    return reinterpret_cast<const float*>(tile + g * kCqTileBlockBytes +
                                          kLutCodeVectors * kLutRows);
  }
};

// ... or the rows' own codes (transposed) and f16 norms (converted).
struct RowSource {
  const CqMatrix* m;
  size_t r0;
  const v128_t* Codes(size_t g, v128_t* scratch) const {
    for (size_t half = 0; half < 2; ++half) {
      for (size_t p = 0; p < kLutRows; ++p)
        scratch[16 * half + p] = Load(m->codes + (r0 + p) * m->row_bytes + 32 * g + 16 * half);
      Transpose16(scratch + 16 * half);
    }
    return scratch;
  }
  const float* Norms(size_t g, float* scratch) const {
    uint16_t h[kLutRows];
    for (size_t r = 0; r < kLutRows; ++r)
      std::memcpy(&h[r], m->norms + ((r0 + r) * m->groups_per_row + g) * 2, 2);
    for (size_t v = 0; v < 4; ++v)
      Store(scratch + 4 * v,
            HalfToFloat(wasm_u32x4_make(h[4 * v], h[4 * v + 1], h[4 * v + 2], h[4 * v + 3])));
    return scratch;
  }
};

// 16 rows (from `source`), groups [g0, g1) of their chains (resumed from y when g0 > 0); tables
// hold the groups' pair tables (BuildPairTables).
template <class Source>
void LutTile(const Source& source, float cb_scale, const float* scales, const v128_t* tables,
             size_t g0, size_t g1, float* y) {
  v128_t acc[4];
  for (size_t v = 0; v < 4; ++v) acc[v] = g0 > 0 ? Load(y + 4 * v) : wasm_f32x4_splat(0.f);
  const v128_t cb = wasm_f32x4_splat(cb_scale);
  const v128_t nibble = wasm_i8x16_splat(15);
  const v128_t offset = wasm_i32x4_splat(64 * 128 * 256);  // the high bytes' bias, summed
  for (size_t g = g0; g < g1; ++g) {
    v128_t scratch[kLutCodeVectors];
    const v128_t* codes = source.Codes(g, scratch);
    v128_t low_all = wasm_i16x8_splat(0), low_odd = low_all, high_all = low_all, high_odd = low_all;
    // Pointer steps and constant offsets: indexing by k would cost an address computation per
    // load in wasm.
    const v128_t* t = tables + (g - g0) * kPairTables;
    for (const v128_t* c = codes; c < codes + kLutCodeVectors; ++c, t += 4) {
      const v128_t code = Load(c);
      const v128_t index[2] = {wasm_v128_and(code, nibble),
                               wasm_v128_and(wasm_u16x8_shr(code, 4), nibble)};
      for (size_t h = 0; h < 2; ++h) {
        const v128_t lo = wasm_i8x16_swizzle(t[2 * h], index[h]);
        const v128_t hi = wasm_i8x16_swizzle(t[2 * h + 1], index[h]);
        low_all = wasm_i16x8_add(low_all, lo);
        low_odd = wasm_i16x8_add(low_odd, wasm_u16x8_shr(lo, 8));
        high_all = wasm_i16x8_add(high_all, hi);
        high_odd = wasm_i16x8_add(high_odd, wasm_u16x8_shr(hi, 8));
      }
    }
    // Even rows: the lanes' low bytes; odd rows: their high bytes; then rows in order.
    const v128_t low_even = wasm_i16x8_sub(low_all, wasm_i16x8_shl(low_odd, 8));
    const v128_t high_even = wasm_i16x8_sub(high_all, wasm_i16x8_shl(high_odd, 8));
    const v128_t low[2] = {wasm_i16x8_shuffle(low_even, low_odd, 0, 8, 1, 9, 2, 10, 3, 11),
                           wasm_i16x8_shuffle(low_even, low_odd, 4, 12, 5, 13, 6, 14, 7, 15)};
    const v128_t high[2] = {wasm_i16x8_shuffle(high_even, high_odd, 0, 8, 1, 9, 2, 10, 3, 11),
                            wasm_i16x8_shuffle(high_even, high_odd, 4, 12, 5, 13, 6, 14, 7, 15)};
    alignas(16) float norm_scratch[kLutRows];
    const float* norms = source.Norms(g, norm_scratch);
    const v128_t s = wasm_f32x4_splat(scales[g]);
    for (size_t v = 0; v < 4; ++v) {
      const v128_t lo16 = low[v / 2], hi16 = high[v / 2];
      const v128_t lo32 =
          v % 2 ? wasm_u32x4_extend_high_u16x8(lo16) : wasm_u32x4_extend_low_u16x8(lo16);
      const v128_t hi32 =
          v % 2 ? wasm_u32x4_extend_high_u16x8(hi16) : wasm_u32x4_extend_low_u16x8(hi16);
      const v128_t dot = wasm_f32x4_convert_i32x4(
          wasm_i32x4_sub(wasm_i32x4_add(wasm_i32x4_shl(hi32, 8), lo32), offset));
      acc[v] = wasm_f32x4_add(
          wasm_f32x4_mul(Load(norms + 4 * v), wasm_f32x4_mul(cb, wasm_f32x4_mul(s, dot))), acc[v]);
    }
  }
  for (size_t v = 0; v < 4; ++v) Store(y + 4 * v, acc[v]);
}

// 2-bit rows [row_begin, row_end): blocks of 16 rows by table lookup (whole tiles of m.tiles when
// present, else any 16 rows from row_begin), the rest by GemvTile.
__attribute__((noinline)) void GemvLut(const CqMatrix& m, const I8Codebook& cb, const I8Acts& acts,
                                       size_t row_begin, size_t row_end, float* y) {
  static thread_local v128_t tables[kLutGroups * kPairTables];  // 32 KB
  const size_t groups = m.groups_per_row;
  size_t lut_begin = row_begin;
  const bool tiled = m.tiles && m.tile_layout == CqTileLayout::kByteColumns;
  if (tiled) lut_begin = std::min(row_end, (row_begin + kLutRows - 1) / kLutRows * kLutRows);
  const size_t lut_end = lut_begin + (row_end - lut_begin) / kLutRows * kLutRows;
  for (size_t g0 = 0; g0 < groups; g0 += kLutGroups) {
    const size_t g1 = std::min(groups, g0 + kLutGroups);
    for (size_t g = g0; g < g1; ++g)
      BuildPairTables(cb, acts.q + g * kI8Group, tables + (g - g0) * kPairTables);
    for (size_t r0 = lut_begin; r0 < lut_end; r0 += kLutRows) {
      float* yr = y + (r0 - row_begin);
      if (tiled)
        LutTile(TileSource{m.tiles + r0 / kLutRows * groups * kCqTileBlockBytes}, cb.scale,
                acts.scales, tables, g0, g1, yr);
      else
        LutTile(RowSource{&m, r0}, cb.scale, acts.scales, tables, g0, g1, yr);
    }
  }
  if (row_begin < lut_begin) GemvBits<2>(m, cb, acts, row_begin, lut_begin, y);
  if (lut_end < row_end) GemvBits<2>(m, cb, acts, lut_end, row_end, y + (lut_end - row_begin));
}

// ---- gemm: one row at a time against a tile of up to kTile tokens (lane = token, four per
// vector); each group's weights are unpacked once for every token of the tile ----

constexpr size_t kTile = 8;

// Activations and scales of one (token tile, group block): a16 [t][group - g0][128] in WidenSplit
// order and scale [group - g0][t] (missing tokens repeat the tile's last token and are not
// stored).
struct TokenBlock {
  alignas(16) int16_t a16[kTile][kGemmGroupBlock * kI8Group];
  alignas(16) float scale[kGemmGroupBlock][kTile];
};

void StageTokens(const I8Acts& acts, size_t groups, size_t t0, size_t tokens, size_t T, size_t g0,
                 size_t g1, TokenBlock* tb) {
  for (size_t t = 0; t < T; ++t) {
    const size_t token = t0 + std::min(t, tokens - 1);
    WidenSplit(acts.q + token * acts.in_pad + g0 * kI8Group, (g1 - g0) * kI8Group, tb->a16[t]);
    for (size_t g = g0; g < g1; ++g) tb->scale[g - g0][t] = acts.scales[token * groups + g];
  }
}

// Tokens [t0, t0 + tokens) of row `row`, the tile's T (4 or 8 >= tokens) staged tokens computed.
template <uint32_t kBits>
void GemmRow(const Unpacker<kBits>& unpack, const GemmArgs& a, const TokenBlock& tb, size_t t0,
             size_t tokens, size_t T, size_t g0, size_t g1, size_t row) {
  const CqMatrix& m = *a.m;
  const uint8_t* codes = m.codes + row * m.row_bytes;
  const uint8_t* row_norms = m.norms + (row * m.groups_per_row + g0) * 2;
  alignas(16) float norms[kGemmGroupBlock];
  for (size_t g = g0; g < g1; g += 4)
    Store(norms + (g - g0), LoadHalves(row_norms + 2 * (g - g0), std::min<size_t>(4, g1 - g)));
  alignas(16) float out[kTile] = {};
  if (g0 > 0)
    for (size_t t = 0; t < tokens; ++t) out[t] = a.y[(t0 + t) * a.ldy + (row - a.row_begin)];
  v128_t acc[kTile / 4] = {Load(out), Load(out + 4)};
  const v128_t cb = wasm_f32x4_splat(a.cb_scale);
  for (size_t g = g0; g < g1; ++g) {
    v128_t w[kBlocks];
    unpack.Group(codes + g * 16 * kBits, w);
    const size_t offset = (g - g0) * kI8Group;
    // One token at a time (a real loop: unrolled, its loads would all be issued first and
    // spilled), the unpacked weights kept in registers and split again per token.
    v128_t d[kTile];
#pragma clang loop unroll(disable)
    for (size_t t = 0; t < T; ++t) {
      const int16_t* at = tb.a16[t] + offset;
      v128_t acc = wasm_i32x4_splat(0);
      for (size_t o = 0; o < kBlocks; ++o) acc = SplitDot(acc, w[o], at + 16 * o);
      d[t] = acc;
    }
    const v128_t norm = wasm_v128_load32_splat(norms + (g - g0));
    for (size_t v = 0; v < T / 4; ++v) {
      const v128_t* dv = d + 4 * v;
      const v128_t dot =
          wasm_f32x4_convert_i32x4(wasm_i32x4_shr(ReduceLanes4(dv[0], dv[1], dv[2], dv[3]), 8));
      const v128_t s = Load(&tb.scale[g - g0][4 * v]);
      acc[v] =
          wasm_f32x4_add(wasm_f32x4_mul(norm, wasm_f32x4_mul(cb, wasm_f32x4_mul(s, dot))), acc[v]);
    }
  }
  Store(out, acc[0]);
  Store(out + 4, acc[1]);
  for (size_t t = 0; t < tokens; ++t) a.y[(t0 + t) * a.ldy + (row - a.row_begin)] = out[t];
}

template <uint32_t kBits>
__attribute__((noinline)) void GemmBits(const CqMatrix& m, const I8Codebook& cb, const I8Acts& acts,
                                        size_t row_begin, size_t row_end, float* y, size_t ldy) {
  const Unpacker<kBits> unpack(cb);
  const GemmArgs a{&m, &acts, cb.scale, row_begin, y, ldy};
  const size_t groups = m.groups_per_row;
  static thread_local TokenBlock tb;  // 33 KB: kept off the stack
  for (size_t t0 = 0; t0 < acts.n; t0 += kTile) {
    const size_t tokens = std::min(kTile, acts.n - t0);
    const size_t T = tokens > 4 ? 8 : 4;
    for (size_t g0 = 0; g0 < groups; g0 += kGemmGroupBlock) {
      const size_t g1 = std::min(groups, g0 + kGemmGroupBlock);
      StageTokens(acts, groups, t0, tokens, T, g0, g1, &tb);
      for (size_t r = row_begin; r < row_end; ++r)
        GemmRow<kBits>(unpack, a, tb, t0, tokens, T, g0, g1, r);
    }
  }
}

}  // namespace

void CqQuantizeI8Simd128(const float* x, size_t n, size_t cols, size_t ldx, size_t in_pad,
                         uint32_t code_bits, int8_t* q, float* scales) {
  QuantizeGroupsLanes<simd128::F32x4>(
      x, n, cols, ldx, in_pad, q, scales, [code_bits](const v128_t* v, float inv, int8_t* dst) {
        const v128_t inv4 = wasm_f32x4_splat(inv);
        v128_t bytes[kBlocks];
        for (size_t o = 0; o < kBlocks; ++o) {
          const v128_t* z = v + 4 * o;
          bytes[o] = LowBytes16(
              RoundToI32(wasm_f32x4_mul(z[0], inv4)), RoundToI32(wasm_f32x4_mul(z[1], inv4)),
              RoundToI32(wasm_f32x4_mul(z[2], inv4)), RoundToI32(wasm_f32x4_mul(z[3], inv4)));
        }
        StoreLayout(code_bits, bytes, dst);
      });
}

void CqGemmI8Simd128(const CqMatrix& m, const I8Codebook& cb, const I8Acts& acts, size_t row_begin,
                     size_t row_end, float* y, size_t ldy) {
  if (m.group != kI8Group || row_begin >= row_end || acts.n == 0 ||
      (m.code_bits != 2 && m.code_bits != 3 && m.code_bits != 4))
    return CqGemmI8Reference(m, cb, acts, row_begin, row_end, y, ldy);
  if (acts.n == 1) {
    switch (m.code_bits) {
      case 2:
        return GemvLut(m, cb, acts, row_begin, row_end, y);
      case 3:
        return GemvBits<3>(m, cb, acts, row_begin, row_end, y);
      default:
        return GemvBits<4>(m, cb, acts, row_begin, row_end, y);
    }
  }
  // With tiles, one table-lookup pass per token beats unpacking each group once for all tokens
  // (about 25 operations per row, group and token against 70).
  if (m.code_bits == 2 && m.tiles && m.tile_layout == CqTileLayout::kByteColumns) {
    const size_t groups = m.groups_per_row;
    for (size_t t = 0; t < acts.n; ++t) {
      const I8Acts one{acts.q + t * acts.in_pad, acts.scales + t * groups, 1, acts.in_pad};
      GemvLut(m, cb, one, row_begin, row_end, y + t * ldy);
    }
    return;
  }
  switch (m.code_bits) {
    case 2:
      return GemmBits<2>(m, cb, acts, row_begin, row_end, y, ldy);
    case 3:
      return GemmBits<3>(m, cb, acts, row_begin, row_end, y, ldy);
    default:
      return GemmBits<4>(m, cb, acts, row_begin, row_end, y, ldy);
  }
}

// Exact for any int8 values (including -128): both sides widened to int16, pairs summed by
// i32x4.dot_i16x8_s.
int32_t DotI8Simd128(const int8_t* a, const int8_t* b, size_t n) {
  v128_t acc = wasm_i32x4_splat(0);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const v128_t x = Load(a + i), z = Load(b + i);
    acc = wasm_i32x4_add(
        acc, wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(x), wasm_i16x8_extend_low_i8x16(z)));
    acc = wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(x),
                                                   wasm_i16x8_extend_high_i8x16(z)));
  }
  int32_t s = wasm_i32x4_extract_lane(acc, 0) + wasm_i32x4_extract_lane(acc, 1) +
              wasm_i32x4_extract_lane(acc, 2) + wasm_i32x4_extract_lane(acc, 3);
  for (; i < n; ++i) s += int32_t{a[i]} * int32_t{b[i]};
  return s;
}

uint64_t MacPeakSimd128(uint64_t rounds) {
  // i16x8 sign extension + i32x4.dot_i16x8_s + i32x4.add (the dot's product): 8 MACs per chain
  // step.
  constexpr size_t kChains = 8;
  v128_t acc[kChains];
  for (v128_t& v : acc) v = wasm_i32x4_splat(0);
  v128_t u = wasm_i8x16_splat(3);
  const v128_t s = wasm_i16x8_splat(-5);
  for (uint64_t r = 0; r < rounds; ++r)
    for (v128_t& v : acc) {
      __asm__ volatile("" : "+r"(u));  // opaque: no chain's product can be reused or hoisted
      v = wasm_i32x4_add(v, wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(u), s));
    }
  v128_t sum = acc[0];
  for (size_t j = 1; j < kChains; ++j) sum = wasm_v128_xor(sum, acc[j]);
  __asm__ volatile("" : : "r"(sum));  // the chains must not be optimized away
  return rounds * kChains * 8;
}

}  // namespace needle::kernels
