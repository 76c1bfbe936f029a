// Small AArch64 NEON helpers shared by the ARM kernel files (quantizers, FWHT, vmath): internal
// linkage, one copy per translation unit. Bit-exact building blocks of the scalar references.
#pragma once

#include <arm_neon.h>

#include <cstddef>

namespace needle::kernels {
namespace {  // NOLINT(cert-dcl59-cpp, google-build-namespaces): one private copy per ISA file

// The NEON float-vector policy of kernels/lane_algorithms.h (4 lanes).
struct F32x4Neon {
  using T = float32x4_t;
  static constexpr size_t kLanes = 4;
  static T Load(const float* p) { return vld1q_f32(p); }
  static void Store(float* p, T v) { vst1q_f32(p, v); }
  static T Splat(float f) { return vdupq_n_f32(f); }
  static T Add(T a, T b) { return vaddq_f32(a, b); }
  static T Sub(T a, T b) { return vsubq_f32(a, b); }
  static T Mul(T a, T b) { return vmulq_f32(a, b); }
  static T Div(T a, T b) { return vdivq_f32(a, b); }
  static T Abs(T v) { return vabsq_f32(v); }
  static T MaxKeep(T m, T x) { return vbslq_f32(vcltq_f32(m, x), x, m); }  // m < x ? x : m
  static float MaxLanes(T v) { return vmaxnmvq_f32(v); }
  // Butterfly stages h = 1 and 2 inside one vector [x0, x1, x2, x3]. IEEE sums commute exactly,
  // so x1 + x0 is the reference's x0 + x1; lanes with bit h set take the reference's a - c.
  static T InVectorStages(T v) {
    T partner = vrev64q_f32(v);  // [x1, x0, x3, x2]
    v = vtrn2q_f32(vaddq_f32(v, partner), vsubq_f32(partner, v));
    partner = vextq_f32(v, v, 2);  // [x2, x3, x0, x1]
    return vcombine_f32(vget_low_f32(vaddq_f32(v, partner)), vget_high_f32(vsubq_f32(partner, v)));
  }
};

// The reference's RoundToI8 on 4 lanes: roundf (FCVTAS rounds half away from zero) as int32, 0
// where !(|x| < 2^31) (NaN, inf, huge), then the low byte (taken by the narrowing).
[[maybe_unused]] inline int32x4_t RoundToI32(float32x4_t x) {
  const uint32x4_t in_range = vcaltq_f32(x, vdupq_n_f32(0x1p31f));
  return vandq_s32(vcvtaq_s32_f32(x), vreinterpretq_s32_u32(in_range));
}

// Low bytes of 16 int32 lanes, in order.
[[maybe_unused]] inline int8x16_t LowBytes(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) {
  const int16x8_t ab = vuzp1q_s16(vreinterpretq_s16_s32(a), vreinterpretq_s16_s32(b));
  const int16x8_t cd = vuzp1q_s16(vreinterpretq_s16_s32(c), vreinterpretq_s16_s32(d));
  return vuzp1q_s8(vreinterpretq_s8_s16(ab), vreinterpretq_s8_s16(cd));
}

}  // namespace
}  // namespace needle::kernels
