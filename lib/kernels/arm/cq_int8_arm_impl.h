// The AArch64 integer CQ kernels (cq_int8.h), written once and compiled in two translation units:
// cq_int8_neon.cpp (baseline Advanced SIMD) and cq_int8_dotprod.cpp (-march=armv8.2-a+dotprod,
// where __ARM_FEATURE_DOTPROD selects SDOT for the int8 dots). Everything here has internal
// linkage so the differently-compiled copies never meet at link time. Bit-exact with the scalar
// reference (cq_int8.cpp); built with -ffp-contract=off (no FMLA: every product and sum below is
// rounded on its own, as the reference's).
//
// Weights: a group's codes become 8 vectors of 16 int8 weights by one AND or shift and one TBL
// (16-byte table of the int8 levels) per vector, in the activation layout of
// I8LayoutPositionArm. Dots: SDOT (4 products into each int32 lane), or SMULL + SMLAL (two products
// per int16 lane: |w|, |a| <= 127, so 2 * 127 * 127 fits) + SADALP. The group dots of 4 rows are
// reduced by ADDP into one vector whose lanes are the rows; each lane then runs the reference's
// chain over the groups in order:
//   acc = norm_g * (cb_scale * (s_g * (float)I_g)) + acc
// Tiles: 8 rows x 1 token (GEMV: the activation vectors are loaded once per group for 8 rows), and
// 4 rows x T <= 4 tokens (GEMM; the rows' codes are unpacked once per group for T tokens).
#pragma once

#include <arm_neon.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/arm/kernels_arm.h"
#include "kernels/arm/neon_common.h"
#include "kernels/cq_int8.h"
#include "kernels/lane_algorithms.h"

namespace needle::kernels {
namespace {  // NOLINT(cert-dcl59-cpp, google-build-namespaces): one private copy per ISA file

constexpr size_t kGroupVectors = kI8Group / 16;  // int8x16 vectors per 128-group

// ---- quantizer ----

// 128 int8 codes in column order -> the layout of I8LayoutPositionArm.
inline void StoreLayout(uint32_t code_bits, const int8_t* column_order, int8_t* dst) {
  if (code_bits == 2) {
    for (size_t b = 0; b < kI8Group; b += 64) {
      const int8x16x4_t d = vld4q_s8(column_order + b);  // d.val[j][i] = column b + 4 i + j
      for (size_t j = 0; j < 4; ++j) vst1q_s8(dst + b + 16 * j, d.val[j]);
    }
  } else if (code_bits == 4) {
    for (size_t b = 0; b < kI8Group; b += 32) {
      const int8x16x2_t d = vld2q_s8(column_order + b);  // d.val[j][i] = column b + 2 i + j
      vst1q_s8(dst + b, d.val[0]);
      vst1q_s8(dst + b + 16, d.val[1]);
    }
  } else {
    std::memcpy(dst, column_order, kI8Group);
  }
}

inline void QuantizeActs(const float* x, size_t n, size_t cols, size_t ldx, size_t in_pad,
                         uint32_t code_bits, int8_t* q, float* scales) {
  // The NEON rounding (RoundToI32) and code layout of one transformed group.
  auto emit = [code_bits](const float32x4_t* v, float inv, int8_t* dst) {
    alignas(16) int8_t column_order[kI8Group];
    for (size_t i = 0; i < 32; i += 4)
      vst1q_s8(
          column_order + 4 * i,
          LowBytes(RoundToI32(vmulq_n_f32(v[i], inv)), RoundToI32(vmulq_n_f32(v[i + 1], inv)),
                   RoundToI32(vmulq_n_f32(v[i + 2], inv)), RoundToI32(vmulq_n_f32(v[i + 3], inv))));
    StoreLayout(code_bits, column_order, dst);
  };
  QuantizeGroupsLanes<F32x4Neon>(x, n, cols, ldx, in_pad, q, scales, emit);
}

// ---- int8 dots ----

// int32 partial sums (4 lanes) of the 128 products w[i] * a[i] of one group; |w|, |a| <= 127.
__attribute__((always_inline)) inline int32x4_t GroupDot(const int8x16_t* w, const int8x16_t* a) {
#if defined(__ARM_FEATURE_DOTPROD)
  int32x4_t acc = vdotq_s32(vdupq_n_s32(0), w[0], a[0]);
  for (size_t i = 1; i < kGroupVectors; ++i) acc = vdotq_s32(acc, w[i], a[i]);
  return acc;
#else
  int32x4_t acc = vdupq_n_s32(0);
  for (size_t i = 0; i < kGroupVectors; i += 2) {
    int16x8_t lo = vmull_s8(vget_low_s8(w[i]), vget_low_s8(a[i]));
    lo = vmlal_s8(lo, vget_low_s8(w[i + 1]), vget_low_s8(a[i + 1]));
    int16x8_t hi = vmull_high_s8(w[i], a[i]);
    hi = vmlal_high_s8(hi, w[i + 1], a[i + 1]);
    acc = vpadalq_s16(acc, lo);
    acc = vpadalq_s16(acc, hi);
  }
  return acc;
#endif
}

// acc + the products of 16 int8 pairs, summed into 4 int32 lanes: SDOT, or SMULL + SMULL2 + two
// SADALP. Exact for every int8 value (including -128: one product per int16 lane, or SDOT's
// int32).
inline int32x4_t DotStep(int32x4_t acc, int8x16_t x, int8x16_t z) {
#if defined(__ARM_FEATURE_DOTPROD)
  return vdotq_s32(acc, x, z);
#else
  acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(x), vget_low_s8(z)));
  return vpadalq_s16(acc, vmull_high_s8(x, z));
#endif
}

// cq_int8.h's MacPeakFn for this file's product (DotStep: 16 MACs per chain step); 16 chains.
inline uint64_t MacPeak(uint64_t rounds) {
  constexpr size_t kChains = 16;
  int32x4_t acc[kChains];
  for (int32x4_t& v : acc) v = vdupq_n_s32(0);
  int8x16_t u = vdupq_n_s8(3);
  const int8x16_t s = vdupq_n_s8(-5);
  for (uint64_t r = 0; r < rounds; ++r)
    for (int32x4_t& v : acc) {
      __asm__ volatile("" : "+w"(u));  // opaque: no chain's product can be reused or hoisted
      v = DotStep(v, u, s);
    }
  int32x4_t sum = acc[0];
  for (size_t j = 1; j < kChains; ++j) sum = veorq_s32(sum, acc[j]);
  __asm__ volatile("" : : "w"(sum));  // the chains must not be optimized away
  return rounds * kChains * 16;
}

inline int32_t DotAny(const int8_t* a, const int8_t* b, size_t n) {
  int32x4_t acc = vdupq_n_s32(0);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc = DotStep(acc, vld1q_s8(a + i), vld1q_s8(b + i));
  }
  int32_t s = vaddvq_s32(acc);
  for (; i < n; ++i) s += int32_t{a[i]} * int32_t{b[i]};
  return s;
}

// ---- weights ----

template <uint32_t kBits>
class Unpacker {
 public:
  explicit Unpacker(const I8Codebook& cb) : q_(cb.q) {
    alignas(16) int8_t lo[16], hi[16];
    I8NibbleTables(cb, kBits, lo, hi);
    lo_ = vld1q_s8(lo);
    hi_ = vld1q_s8(hi);
  }

  int8x16_t lo() const { return lo_; }
  int8x16_t hi() const { return hi_; }

  // The group's 128 int8 weights in the activation layout; `codes`: its 16 * kBits code bytes.
  __attribute__((always_inline)) inline void Group(const uint8_t* codes, int8x16_t* w) const {
    const uint8x16_t nibble = vdupq_n_u8(15);
    if constexpr (kBits == 2) {
      for (size_t h = 0; h < 2; ++h) {
        const uint8x16_t c = vld1q_u8(codes + 16 * h);
        const uint8x16_t low = vandq_u8(c, nibble), high = vshrq_n_u8(c, 4);
        w[4 * h + 0] = vqtbl1q_s8(lo_, low);   // bits 0-1
        w[4 * h + 1] = vqtbl1q_s8(hi_, low);   // bits 2-3
        w[4 * h + 2] = vqtbl1q_s8(lo_, high);  // bits 4-5
        w[4 * h + 3] = vqtbl1q_s8(hi_, high);  // bits 6-7
      }
    } else if constexpr (kBits == 4) {
      for (size_t h = 0; h < 4; ++h) {
        const uint8x16_t c = vld1q_u8(codes + 16 * h);
        w[2 * h] = vqtbl1q_s8(lo_, vandq_u8(c, nibble));
        w[2 * h + 1] = vqtbl1q_s8(lo_, vshrq_n_u8(c, 4));
      }
    } else {  // 3-bit (no fixture uses it): bit by bit, column order
      alignas(16) int8_t buf[kI8Group];
      for (size_t k = 0; k < kI8Group; ++k) buf[k] = q_[CqCodeAt(codes, k, kBits)];
      for (size_t i = 0; i < kGroupVectors; ++i) w[i] = vld1q_s8(buf + 16 * i);
    }
  }

 private:
  const int8_t* q_;
  int8x16_t lo_, hi_;
};

#if defined(__ARM_FEATURE_DOTPROD)
// GEMV (one token): one row's group dot straight from its codes, in one block of assembly so the
// compiler cannot hoist the eight rows' unpacking ahead of their dots (GCC 12 then spills and
// copies SDOT accumulators: ~34 instructions per row and 2-bit group instead of these 23).
// 2-bit: 1 LDP, 2 AND + 2 USHR (nibbles), 8 TBL, 1 MOVI, 8 SDOT. 4-bit: 2 LDP, 4 AND + 4 USHR,
// 8 TBL, 1 MOVI, 8 SDOT. x: the group's 8 activation vectors in the layout.
template <uint32_t kBits>
__attribute__((always_inline)) inline int32x4_t GemvGroupDot(const uint8_t* codes,
                                                             const int8x16_t* x, int8x16_t lo,
                                                             int8x16_t hi, uint8x16_t nibble) {
  int32x4_t acc;
  uint8x16_t c0, c1, t0, t1;
  int8x16_t w0, w1;
  if constexpr (kBits == 2) {
    asm("ldp %q[c0], %q[c1], [%[p]]\n\t"
        "movi %[acc].4s, #0\n\t"
        "and %[t0].16b, %[c0].16b, %[m].16b\n\t"
        "ushr %[t1].16b, %[c0].16b, #4\n\t"
        "tbl %[w0].16b, {%[lo].16b}, %[t0].16b\n\t"
        "tbl %[w1].16b, {%[hi].16b}, %[t0].16b\n\t"
        "sdot %[acc].4s, %[w0].16b, %[x0].16b\n\t"
        "sdot %[acc].4s, %[w1].16b, %[x1].16b\n\t"
        "tbl %[w0].16b, {%[lo].16b}, %[t1].16b\n\t"
        "tbl %[w1].16b, {%[hi].16b}, %[t1].16b\n\t"
        "sdot %[acc].4s, %[w0].16b, %[x2].16b\n\t"
        "sdot %[acc].4s, %[w1].16b, %[x3].16b\n\t"
        "and %[t0].16b, %[c1].16b, %[m].16b\n\t"
        "ushr %[t1].16b, %[c1].16b, #4\n\t"
        "tbl %[w0].16b, {%[lo].16b}, %[t0].16b\n\t"
        "tbl %[w1].16b, {%[hi].16b}, %[t0].16b\n\t"
        "sdot %[acc].4s, %[w0].16b, %[x4].16b\n\t"
        "sdot %[acc].4s, %[w1].16b, %[x5].16b\n\t"
        "tbl %[w0].16b, {%[lo].16b}, %[t1].16b\n\t"
        "tbl %[w1].16b, {%[hi].16b}, %[t1].16b\n\t"
        "sdot %[acc].4s, %[w0].16b, %[x6].16b\n\t"
        "sdot %[acc].4s, %[w1].16b, %[x7].16b"
        : [acc] "=&w"(acc), [c0] "=&w"(c0), [c1] "=&w"(c1), [t0] "=&w"(t0), [t1] "=&w"(t1),
          [w0] "=&w"(w0), [w1] "=&w"(w1)
        : [p] "r"(codes), [m] "w"(nibble), [lo] "w"(lo), [hi] "w"(hi), [x0] "w"(x[0]),
          [x1] "w"(x[1]), [x2] "w"(x[2]), [x3] "w"(x[3]), [x4] "w"(x[4]), [x5] "w"(x[5]),
          [x6] "w"(x[6]), [x7] "w"(x[7]), "m"(*reinterpret_cast<const uint8_t(*)[32]>(codes)));
  } else {
    uint8x16_t c2, c3;
    asm("ldp %q[c0], %q[c1], [%[p]]\n\t"
        "ldp %q[c2], %q[c3], [%[p], #32]\n\t"
        "movi %[acc].4s, #0\n\t"
        "and %[t0].16b, %[c0].16b, %[m].16b\n\t"
        "ushr %[t1].16b, %[c0].16b, #4\n\t"
        "tbl %[w0].16b, {%[lo].16b}, %[t0].16b\n\t"
        "tbl %[w1].16b, {%[lo].16b}, %[t1].16b\n\t"
        "sdot %[acc].4s, %[w0].16b, %[x0].16b\n\t"
        "sdot %[acc].4s, %[w1].16b, %[x1].16b\n\t"
        "and %[t0].16b, %[c1].16b, %[m].16b\n\t"
        "ushr %[t1].16b, %[c1].16b, #4\n\t"
        "tbl %[w0].16b, {%[lo].16b}, %[t0].16b\n\t"
        "tbl %[w1].16b, {%[lo].16b}, %[t1].16b\n\t"
        "sdot %[acc].4s, %[w0].16b, %[x2].16b\n\t"
        "sdot %[acc].4s, %[w1].16b, %[x3].16b\n\t"
        "and %[t0].16b, %[c2].16b, %[m].16b\n\t"
        "ushr %[t1].16b, %[c2].16b, #4\n\t"
        "tbl %[w0].16b, {%[lo].16b}, %[t0].16b\n\t"
        "tbl %[w1].16b, {%[lo].16b}, %[t1].16b\n\t"
        "sdot %[acc].4s, %[w0].16b, %[x4].16b\n\t"
        "sdot %[acc].4s, %[w1].16b, %[x5].16b\n\t"
        "and %[t0].16b, %[c3].16b, %[m].16b\n\t"
        "ushr %[t1].16b, %[c3].16b, #4\n\t"
        "tbl %[w0].16b, {%[lo].16b}, %[t0].16b\n\t"
        "tbl %[w1].16b, {%[lo].16b}, %[t1].16b\n\t"
        "sdot %[acc].4s, %[w0].16b, %[x6].16b\n\t"
        "sdot %[acc].4s, %[w1].16b, %[x7].16b"
        : [acc] "=&w"(acc), [c0] "=&w"(c0), [c1] "=&w"(c1), [c2] "=&w"(c2), [c3] "=&w"(c3),
          [t0] "=&w"(t0), [t1] "=&w"(t1), [w0] "=&w"(w0), [w1] "=&w"(w1)
        : [p] "r"(codes), [m] "w"(nibble), [lo] "w"(lo), [x0] "w"(x[0]), [x1] "w"(x[1]),
          [x2] "w"(x[2]), [x3] "w"(x[3]), [x4] "w"(x[4]), [x5] "w"(x[5]), [x6] "w"(x[6]),
          [x7] "w"(x[7]), "m"(*reinterpret_cast<const uint8_t(*)[64]>(codes)));
    (void)hi;
  }
  return acc;
}
#endif

// ---- gemm ----

struct GemmArgs {
  const CqMatrix* m;
  const I8Acts* acts;
  float cb_scale;
  size_t row_begin;
  float* y;
  size_t ldy;
};

// Rows [r0, r0 + rows) (rows <= R; missing rows repeat the last one and are not stored) against
// tokens [t0, t0 + T). R is a multiple of 4 (one float vector per 4 rows).
template <uint32_t kBits, size_t R, size_t T>
void Tile(const Unpacker<kBits>& unpack, const GemmArgs& a, size_t t0, size_t r0, size_t rows) {
  static_assert(R % 4 == 0);
  constexpr size_t kRowVectors = R / 4;
  const CqMatrix& m = *a.m;
  const size_t G = m.groups_per_row, in_pad = a.acts->in_pad;
  const size_t code_bytes = 16 * kBits;
  const uint8_t* codes[R];
  const uint8_t* norms[R];  // f16, maybe unaligned
  for (size_t r = 0; r < R; ++r) {
    const size_t row = r0 + std::min(r, rows - 1);
    codes[r] = m.codes + row * m.row_bytes;
    norms[r] = m.norms + row * G * 2;
  }
  float32x4_t acc[T][kRowVectors];
  for (size_t t = 0; t < T; ++t)
    for (size_t v = 0; v < kRowVectors; ++v) acc[t][v] = vdupq_n_f32(0.f);
  const float32x4_t cb = vdupq_n_f32(a.cb_scale);
  const int8_t* q = a.acts->q + t0 * in_pad;
  const float* scales = a.acts->scales + t0 * G;
  for (size_t g = 0; g < G; ++g) {
    int32x4_t dots[T][R];
    if constexpr (T == 1) {
      int8x16_t x[kGroupVectors];
      for (size_t i = 0; i < kGroupVectors; ++i) x[i] = vld1q_s8(q + g * kI8Group + 16 * i);
#pragma GCC unroll 8
      for (size_t r = 0; r < R; ++r) {
#if defined(__ARM_FEATURE_DOTPROD)
        if constexpr (kBits != 3) {
          dots[0][r] = GemvGroupDot<kBits>(codes[r] + g * code_bytes, x, unpack.lo(), unpack.hi(),
                                           vdupq_n_u8(15));
          continue;
        }
#endif
        int8x16_t w[kGroupVectors];
        unpack.Group(codes[r] + g * code_bytes, w);
        dots[0][r] = GroupDot(w, x);
      }
    } else {
#pragma GCC unroll 4
      for (size_t r = 0; r < R; ++r) {
        int8x16_t w[kGroupVectors];
        unpack.Group(codes[r] + g * code_bytes, w);
        for (size_t t = 0; t < T; ++t) {
          int8x16_t x[kGroupVectors];
          const int8_t* qt = q + t * in_pad + g * kI8Group;
          for (size_t i = 0; i < kGroupVectors; ++i) x[i] = vld1q_s8(qt + 16 * i);
          dots[t][r] = GroupDot(w, x);
        }
      }
    }
    // The rows' f16 norms of this group (f16 -> f32 is exact).
    float32x4_t norm[kRowVectors];
    for (size_t v = 0; v < kRowVectors; ++v) {
      alignas(8) uint16_t h[4];
      for (size_t i = 0; i < 4; ++i) std::memcpy(&h[i], norms[4 * v + i] + 2 * g, 2);
      norm[v] = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
    }
    for (size_t t = 0; t < T; ++t) {
      const float s = scales[t * G + g];
      for (size_t v = 0; v < kRowVectors; ++v) {
        const int32x4_t sums = vpaddq_s32(vpaddq_s32(dots[t][4 * v], dots[t][4 * v + 1]),
                                          vpaddq_s32(dots[t][4 * v + 2], dots[t][4 * v + 3]));
        const float32x4_t term =
            vmulq_f32(norm[v], vmulq_f32(cb, vmulq_n_f32(vcvtq_f32_s32(sums), s)));
        acc[t][v] = vaddq_f32(term, acc[t][v]);
      }
    }
  }
  for (size_t t = 0; t < T; ++t) {
    float* y = a.y + (t0 + t) * a.ldy + (r0 - a.row_begin);
    for (size_t v = 0; v < kRowVectors; ++v) {
      if (rows >= 4 * v + 4) {
        vst1q_f32(y + 4 * v, acc[t][v]);
      } else if (rows > 4 * v) {
        alignas(16) float out[4];
        vst1q_f32(out, acc[t][v]);
        std::memcpy(y + 4 * v, out, (rows - 4 * v) * sizeof(float));
      }
    }
  }
}

template <uint32_t kBits>
void GemmBits(const CqMatrix& m, const I8Codebook& cb, const I8Acts& acts, size_t row_begin,
              size_t row_end, float* y, size_t ldy) {
  const Unpacker<kBits> unpack(cb);
  const GemmArgs a{&m, &acts, cb.scale, row_begin, y, ldy};
  if (acts.n == 1) {
    for (size_t r0 = row_begin; r0 < row_end; r0 += 8)
      Tile<kBits, 8, 1>(unpack, a, 0, r0, std::min<size_t>(8, row_end - r0));
    return;
  }
  // Rows outer: a 4-row tile's codes stay in L1 while every token tile uses them.
  for (size_t r0 = row_begin; r0 < row_end; r0 += 4) {
    const size_t rows = std::min<size_t>(4, row_end - r0);
    size_t t0 = 0;
    for (; t0 + 4 <= acts.n; t0 += 4) Tile<kBits, 4, 4>(unpack, a, t0, r0, rows);
    switch (acts.n - t0) {
      case 3:
        Tile<kBits, 4, 3>(unpack, a, t0, r0, rows);
        break;
      case 2:
        Tile<kBits, 4, 2>(unpack, a, t0, r0, rows);
        break;
      case 1:
        Tile<kBits, 4, 1>(unpack, a, t0, r0, rows);
        break;
      default:
        break;
    }
  }
}

inline void GemmActs(const CqMatrix& m, const I8Codebook& cb, const I8Acts& acts, size_t row_begin,
                     size_t row_end, float* y, size_t ldy) {
  if (m.group != kI8Group || row_begin >= row_end || acts.n == 0)
    return CqGemmI8Reference(m, cb, acts, row_begin, row_end, y, ldy);
  switch (m.code_bits) {
    case 2:
      return GemmBits<2>(m, cb, acts, row_begin, row_end, y, ldy);
    case 3:
      return GemmBits<3>(m, cb, acts, row_begin, row_end, y, ldy);
    case 4:
      return GemmBits<4>(m, cb, acts, row_begin, row_end, y, ldy);
    default:
      return CqGemmI8Reference(m, cb, acts, row_begin, row_end, y, ldy);
  }
}

}  // namespace
}  // namespace needle::kernels
