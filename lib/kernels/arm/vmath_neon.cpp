// AArch64 NEON versions of the array kernels of kernels/vmath.h: expf / logf on 4 floats per step
// (two vectors of 2 doubles running libm.cpp's double operations in its order; no FMA, built with
// -ffp-contract=off; table entries loaded lane by lane) and the int8 quantizer (the reference's f32
// product and exact rounding per element). Lanes with special inputs (|x| >= 88 for expf;
// subnormal, zero, negative, inf or NaN for logf) take the scalar port's result. Bit-exact with
// the scalar references (tests/vmath_test.cpp). Serves both ARM tables.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "kernels/arm/kernels_arm.h"
#include "kernels/arm/neon_common.h"
#include "kernels/lane_algorithms.h"
#include "kernels/libm.h"
#include "kernels/vmath.h"

namespace needle::kernels {

namespace {

namespace c = vmath_internal;

constexpr size_t kLanes = 4;

// Two table entries (64-bit) picked by the low lanes of idx.
inline uint64x2_t Lookup2(const uint64_t* table, uint64x2_t idx) {
  return vcombine_u64(vld1_u64(table + vgetq_lane_u64(idx, 0)),
                      vld1_u64(table + vgetq_lane_u64(idx, 1)));
}

inline float64x2_t Lookup2(const double* table, uint32_t i0, uint32_t i1) {
  return vcombine_f64(vld1_f64(table + i0), vld1_f64(table + i1));
}

// libm::Expf's main path on 2 lanes.
inline float32x2_t ExpCore(float32x2_t x) {
  const float64x2_t shift = vdupq_n_f64(c::kExpShift);
  const float64x2_t z = vmulq_f64(vdupq_n_f64(c::kExpInvLn2N), vcvt_f64_f32(x));
  float64x2_t kd = vaddq_f64(z, shift);
  const uint64x2_t ki = vreinterpretq_u64_f64(kd);
  kd = vsubq_f64(kd, shift);
  const float64x2_t r = vsubq_f64(z, kd);  // x*32/ln2 = k + r
  uint64x2_t t = Lookup2(c::kExp2Table, vandq_u64(ki, vdupq_n_u64(31)));
  t = vaddq_u64(t, vshlq_n_u64(ki, 47));
  const float64x2_t s = vreinterpretq_f64_u64(t);  // 2^(k/32)
  const float64x2_t p =
      vaddq_f64(vmulq_f64(vdupq_n_f64(c::kExpPoly[0]), r), vdupq_n_f64(c::kExpPoly[1]));
  const float64x2_t r2 = vmulq_f64(r, r);
  float64x2_t y = vaddq_f64(vmulq_f64(vdupq_n_f64(c::kExpPoly[2]), r), vdupq_n_f64(1.0));
  y = vaddq_f64(vmulq_f64(p, r2), y);
  y = vmulq_f64(y, s);
  return vcvt_f32_f64(y);
}

inline float32x4_t Expf4(float32x4_t x) {
  float32x4_t y = vcombine_f32(ExpCore(vget_low_f32(x)), ExpCore(vget_high_f32(x)));
  // |x| >= 88, inf or NaN (the scalar's abs_top12 >= 0x42b): the scalar function.
  const uint32x4_t abs_bits = vandq_u32(vreinterpretq_u32_f32(x), vdupq_n_u32(0x7fffffff));
  const uint32x4_t big = vcgtq_u32(abs_bits, vdupq_n_u32(0x42afffff));
  if (vmaxvq_u32(big) != 0) {
    alignas(16) float in[kLanes], out[kLanes];
    vst1q_f32(in, x);
    vst1q_f32(out, y);
    for (size_t i = 0; i < kLanes; ++i)
      if ((std::bit_cast<uint32_t>(in[i]) & 0x7fffffff) > 0x42afffff) out[i] = libm::Expf(in[i]);
    y = vld1q_f32(out);
  }
  return y;
}

// libm::Logf's main path on 2 lanes of bits ix (positive normal).
inline float32x2_t LogCore(uint32x2_t ix) {
  const uint32x2_t tmp = vsub_u32(ix, vdup_n_u32(c::kLogOff));
  const uint32x2_t i = vand_u32(vshr_n_u32(tmp, 19), vdup_n_u32(15));
  const int32x2_t k = vshr_n_s32(vreinterpret_s32_u32(tmp), 23);  // arithmetic
  const uint32x2_t iz = vsub_u32(ix, vand_u32(tmp, vdup_n_u32(0xff800000u)));
  const uint32_t i0 = vget_lane_u32(i, 0), i1 = vget_lane_u32(i, 1);
  const float64x2_t invc = Lookup2(c::kLogInvC, i0, i1);
  const float64x2_t logc = Lookup2(c::kLogLogC, i0, i1);
  const float64x2_t z = vcvt_f64_f32(vreinterpret_f32_u32(iz));
  const float64x2_t r = vsubq_f64(vmulq_f64(z, invc), vdupq_n_f64(1.0));
  const float64x2_t y0 =
      vaddq_f64(logc, vmulq_f64(vcvtq_f64_s64(vmovl_s32(k)), vdupq_n_f64(c::kLogLn2)));
  const float64x2_t r2 = vmulq_f64(r, r);
  float64x2_t y = vaddq_f64(vmulq_f64(vdupq_n_f64(c::kLogPoly[1]), r), vdupq_n_f64(c::kLogPoly[2]));
  y = vaddq_f64(vmulq_f64(vdupq_n_f64(c::kLogPoly[0]), r2), y);
  y = vaddq_f64(vmulq_f64(y, r2), vaddq_f64(y0, r));
  return vcvt_f32_f64(y);
}

inline float32x4_t Logf4(float32x4_t x) {
  const uint32x4_t ix = vreinterpretq_u32_f32(x);
  float32x4_t y = vcombine_f32(LogCore(vget_low_u32(ix)), LogCore(vget_high_u32(ix)));
  // Subnormal, zero, negative, inf or NaN: ix - 0x00800000 >= 0x7f000000 (unsigned). x == 1 is
  // 0 on the main path too (r = 0, k = 0, log c = 0).
  const uint32x4_t special =
      vcgeq_u32(vsubq_u32(ix, vdupq_n_u32(0x00800000)), vdupq_n_u32(0x7f000000));
  if (vmaxvq_u32(special) != 0) {
    alignas(16) float in[kLanes], out[kLanes];
    vst1q_f32(in, x);
    vst1q_f32(out, y);
    for (size_t i = 0; i < kLanes; ++i)
      if (std::bit_cast<uint32_t>(in[i]) - 0x00800000u >= 0x7f000000u) out[i] = libm::Logf(in[i]);
    y = vld1q_f32(out);
  }
  return y;
}

// y = f(x) over n floats, 4 at a time; the tail goes through a zero-padded buffer.
template <float32x4_t (*kF)(float32x4_t)>
inline void Apply(const float* x, float* y, size_t n) {
  size_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    const float32x4_t a = vld1q_f32(x + i), b = vld1q_f32(x + i + kLanes);
    vst1q_f32(y + i, kF(a));
    vst1q_f32(y + i + kLanes, kF(b));
  }
  for (; i + kLanes <= n; i += kLanes) vst1q_f32(y + i, kF(vld1q_f32(x + i)));
  if (i < n) {
    alignas(16) float buf[kLanes] = {};
    std::memcpy(buf, x + i, (n - i) * sizeof(float));
    vst1q_f32(buf, kF(vld1q_f32(buf)));
    std::memcpy(y + i, buf, (n - i) * sizeof(float));
  }
}

inline float32x4_t Trn64(float32x4_t a, float32x4_t b, bool second) {
  const float64x2_t x = vreinterpretq_f64_f32(a), y = vreinterpretq_f64_f32(b);
  return vreinterpretq_f32_f64(second ? vtrn2q_f64(x, y) : vtrn1q_f64(x, y));
}

inline void Transpose4(float32x4_t* v) {
  const float32x4_t t0 = vtrn1q_f32(v[0], v[1]), t1 = vtrn2q_f32(v[0], v[1]);
  const float32x4_t t2 = vtrn1q_f32(v[2], v[3]), t3 = vtrn2q_f32(v[2], v[3]);
  v[0] = Trn64(t0, t2, false);
  v[1] = Trn64(t1, t3, false);
  v[2] = Trn64(t0, t2, true);
  v[3] = Trn64(t1, t3, true);
}

}  // namespace

void SinkhornNeon(float* P, size_t n, size_t count, int rounds, float* scratch) {
  if (n != 4) return SinkhornArrays(&ExpfArrayNeon, &LogfArrayNeon, P, n, count, rounds, scratch);
  for (size_t c = 0; c < count; ++c)
    Sinkhorn4Lanes<F32x4Neon, Expf4, Logf4, Transpose4>(P + 16 * c, rounds);
}

void ExpfArrayNeon(const float* x, float* y, size_t n) { Apply<Expf4>(x, y, n); }

void LogfArrayNeon(const float* x, float* y, size_t n) { Apply<Logf4>(x, y, n); }

float QuantizeI8Neon(const float* v, size_t n, int8_t* q) {
  // FMAXNM keeps amax when v is NaN, like the reference's std::max(amax, |v|).
  float32x4_t amax4 = vdupq_n_f32(0.f);
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) amax4 = vmaxnmq_f32(amax4, vabsq_f32(vld1q_f32(v + i)));
  float amax = vmaxnmvq_f32(amax4);
  for (; i < n; ++i) amax = std::max(amax, std::fabs(v[i]));
  const float s = amax > 0.f ? amax / 127.0f : 1.0f;
  const float inv = 1.0f / s;
  i = 0;
  for (; i + 4 * kLanes <= n; i += 4 * kLanes)
    vst1q_s8(q + i, LowBytes(RoundToI32(vmulq_n_f32(vld1q_f32(v + i), inv)),
                             RoundToI32(vmulq_n_f32(vld1q_f32(v + i + 4), inv)),
                             RoundToI32(vmulq_n_f32(vld1q_f32(v + i + 8), inv)),
                             RoundToI32(vmulq_n_f32(vld1q_f32(v + i + 12), inv))));
  if (i < n) {
    alignas(16) float buf[4 * kLanes] = {};
    alignas(16) int8_t bytes[4 * kLanes];
    std::memcpy(buf, v + i, (n - i) * sizeof(float));
    vst1q_s8(bytes, LowBytes(RoundToI32(vmulq_n_f32(vld1q_f32(buf), inv)),
                             RoundToI32(vmulq_n_f32(vld1q_f32(buf + 4), inv)),
                             RoundToI32(vmulq_n_f32(vld1q_f32(buf + 8), inv)),
                             RoundToI32(vmulq_n_f32(vld1q_f32(buf + 12), inv))));
    std::memcpy(q + i, bytes, n - i);
  }
  return s;
}

}  // namespace needle::kernels
