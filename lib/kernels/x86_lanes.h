// The x86 float-vector policies of kernels/lane_algorithms.h (F32x8: AVX, F32x16: AVX-512F) and
// the exact float helpers the x86 kernel files share (roundf on lanes). Included only by
// translation units compiled with -mavx2 (F32x8) or -mavx512f (both); internal linkage, one copy
// per file. Each operation is its scalar counterpart lane by lane.
#pragma once

#include <cstddef>

#include "kernels/x86_intrin.h"

namespace needle::kernels {
namespace {  // NOLINT(cert-dcl59-cpp, google-build-namespaces): one private copy per ISA file

#if defined(__AVX__)
struct F32x8 {
  using T = __m256;
  static constexpr size_t kLanes = 8;
  static T Load(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, T v) { _mm256_storeu_ps(p, v); }
  static T Splat(float f) { return _mm256_set1_ps(f); }
  static T Add(T a, T b) { return _mm256_add_ps(a, b); }
  static T Sub(T a, T b) { return _mm256_sub_ps(a, b); }
  static T Mul(T a, T b) { return _mm256_mul_ps(a, b); }
  static T Div(T a, T b) { return _mm256_div_ps(a, b); }
  static T Abs(T v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }
  // vmaxps returns its second operand when either is NaN: x first, so a NaN x keeps m.
  static T MaxKeep(T m, T x) { return _mm256_max_ps(x, m); }
  static float MaxLanes(T v) {
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    return _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
  }
  // Butterfly stages h = 1, 2, 4: lanes with bit h set take partner - self (the reference's a - c
  // with a = x[i - h]), the others self + partner.
  static T InVectorStages(T v) {
    T partner = _mm256_permute_ps(v, 0xB1);  // swap neighbours
    v = _mm256_blend_ps(_mm256_add_ps(v, partner), _mm256_sub_ps(partner, v), 0xAA);
    partner = _mm256_permute_ps(v, 0x4E);  // swap pairs
    v = _mm256_blend_ps(_mm256_add_ps(v, partner), _mm256_sub_ps(partner, v), 0xCC);
    partner = _mm256_permute2f128_ps(v, v, 0x01);  // swap 128-bit halves
    return _mm256_blend_ps(_mm256_add_ps(v, partner), _mm256_sub_ps(partner, v), 0xF0);
  }
  // roundf (half away from zero), exactly: x - trunc(x) is exact, so |fraction| >= 0.5 decides.
  static T RoundHalfAway(T x) {
    const T sign = _mm256_set1_ps(-0.0f);
    const T t = _mm256_round_ps(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const T frac = _mm256_andnot_ps(sign, _mm256_sub_ps(x, t));
    const T up = _mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    const T one = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(x, sign));
    return _mm256_add_ps(t, _mm256_and_ps(up, one));  // t + 0 keeps t's integer value
  }
  // The reference's int8 of x (cq_int8.cpp's RoundToI8) in int32 lanes: roundf, converted to int32
  // (NaN, inf and |x| >= 2^31 give INT32_MIN, whose low byte is the reference's 0), then the low
  // byte sign-extended, so that saturating packs keep it.
  static __m256i RoundToI8(T x) {
    const __m256i i32 = _mm256_cvttps_epi32(RoundHalfAway(x));
    return _mm256_srai_epi32(_mm256_slli_epi32(i32, 24), 24);
  }
};
#endif

#if defined(__AVX__)
// Four lanes (SSE registers): the attention softmax of a head count that is not a multiple of 8
// (a thread's half of 8 heads, 12 heads).
struct F32x4 {
  using T = __m128;
  static constexpr size_t kLanes = 4;
  static T Load(const float* p) { return _mm_loadu_ps(p); }
  static void Store(float* p, T v) { _mm_storeu_ps(p, v); }
  static T Splat(float f) { return _mm_set1_ps(f); }
  static T Add(T a, T b) { return _mm_add_ps(a, b); }
  static T Sub(T a, T b) { return _mm_sub_ps(a, b); }
  static T Mul(T a, T b) { return _mm_mul_ps(a, b); }
  static T Div(T a, T b) { return _mm_div_ps(a, b); }
  // As F32x8::MaxKeep: x first, so a NaN x keeps m.
  static T MaxKeep(T m, T x) { return _mm_max_ps(x, m); }
};
#endif

#if defined(__AVX512F__)
struct F32x16 {
  using T = __m512;
  static constexpr size_t kLanes = 16;
  static T Load(const float* p) { return _mm512_loadu_ps(p); }
  static void Store(float* p, T v) { _mm512_storeu_ps(p, v); }
  static T Splat(float f) { return _mm512_set1_ps(f); }
  static T Add(T a, T b) { return _mm512_add_ps(a, b); }
  static T Sub(T a, T b) { return _mm512_sub_ps(a, b); }
  static T Mul(T a, T b) { return _mm512_mul_ps(a, b); }
  static T Div(T a, T b) { return _mm512_div_ps(a, b); }
  static T Abs(T v) { return _mm512_abs_ps(v); }
  static T MaxKeep(T m, T x) { return _mm512_max_ps(x, m); }  // as F32x8::MaxKeep
  static float MaxLanes(T v) { return _mm512_reduce_max_ps(v); }
  // Butterfly stages h = 1, 2, 4, 8 (see F32x8::InVectorStages).
  static T InVectorStages(T v) {
    v = Stage(v, _mm512_permute_ps(v, 0xB1), 0xAAAA);
    v = Stage(v, _mm512_permute_ps(v, 0x4E), 0xCCCC);
    v = Stage(v, _mm512_shuffle_f32x4(v, v, 0xB1), 0xF0F0);     // swap 128-bit lanes 0<->1, 2<->3
    return Stage(v, _mm512_shuffle_f32x4(v, v, 0x4E), 0xFF00);  // swap 256-bit halves
  }
  // roundf (half away from zero), exactly (see F32x8::RoundHalfAway).
  static T RoundHalfAway(T x) {
    const T t = _mm512_roundscale_ps(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const T frac = _mm512_abs_ps(_mm512_sub_ps(x, t));
    const __mmask16 up = _mm512_cmp_ps_mask(frac, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    const T one = _mm512_or_ps(_mm512_set1_ps(1.0f),
                               _mm512_and_ps(x, _mm512_set1_ps(-0.0f)));  // copysign(1, x)
    return _mm512_mask_add_ps(t, up, t, one);
  }

 private:
  static T Stage(T v, T partner, __mmask16 upper) {
    return _mm512_mask_sub_ps(_mm512_add_ps(v, partner), upper, partner, v);
  }
};
#endif

}  // namespace
}  // namespace needle::kernels
