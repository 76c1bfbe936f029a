// AVX-512 (F/BW/VL/DQ) integer CQ kernels: the activation quantizer (shared by the VNNI gemm) and
// the vpmaddubsw gemm / dot of cq_int8_avx512_impl.h. Bit-exact with the scalar reference
// (cq_int8.cpp): the quantizer performs the reference's float operations on every element, 16
// elements at a time; built with -ffp-contract=off. Only called after the dispatcher's CPU check.
#include <algorithm>
#include <cmath>

#include "kernels/cq_int8.h"
#include "kernels/cq_int8_avx512_impl.h"
#include "kernels/cq_int8_x86.h"
#include "kernels/x86_intrin.h"

namespace needle::kernels {

namespace {

// One butterfly stage h < 16 inside a register: lanes with bit h set take partner - self (the
// reference's a - c with a = x[i - h]), the others self + partner.
template <int kH>
inline __m512 InRegisterStage(__m512 v) {
  __m512 partner;
  __mmask16 upper;
  if constexpr (kH == 1) {
    partner = _mm512_permute_ps(v, 0xB1);
    upper = 0xAAAA;
  } else if constexpr (kH == 2) {
    partner = _mm512_permute_ps(v, 0x4E);
    upper = 0xCCCC;
  } else if constexpr (kH == 4) {
    partner = _mm512_shuffle_f32x4(v, v, 0xB1);  // swap 128-bit lanes 0<->1, 2<->3
    upper = 0xF0F0;
  } else {
    partner = _mm512_shuffle_f32x4(v, v, 0x4E);  // swap 256-bit halves
    upper = 0xFF00;
  }
  return _mm512_mask_sub_ps(_mm512_add_ps(v, partner), upper, partner, v);
}

// roundf (half away from zero), exactly: x - trunc(x) is exact, so |fraction| >= 0.5 decides.
inline __m512 RoundHalfAway(__m512 x) {
  const __m512 t = _mm512_roundscale_ps(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m512 frac = _mm512_abs_ps(_mm512_sub_ps(x, t));
  const __mmask16 up = _mm512_cmp_ps_mask(frac, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  const __m512 one = _mm512_or_ps(_mm512_set1_ps(1.0f),
                                  _mm512_and_ps(x, _mm512_set1_ps(-0.0f)));  // copysign(1, x)
  return _mm512_mask_add_ps(t, up, t, one);
}

// 128 int8 codes in column order (two 64-byte vectors) -> the layout of I8LayoutPositionX86.
inline void StoreLayout(uint32_t code_bits, __m512i z0, __m512i z1, int8_t* dst) {
  __m512i out0, out1;
  if (code_bits == 2) {
    // 4x4 byte transpose per 128-bit lane: dword j of a lane = crumb-j columns, then gather the
    // dwords of equal j.
    const __m512i transpose =
        _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    z0 = _mm512_shuffle_epi8(z0, transpose);
    z1 = _mm512_shuffle_epi8(z1, transpose);
    out0 = _mm512_permutex2var_epi32(
        z0, _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29), z1);
    out1 = _mm512_permutex2var_epi32(
        z0, _mm512_setr_epi32(2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31), z1);
  } else if (code_bits == 3) {
    out0 = _mm512_permutex2var_epi32(
        z0, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), z1);
    out1 = _mm512_permutex2var_epi32(
        z0, _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31), z1);
  } else {
    const __m512i split =
        _mm512_broadcast_i32x4(_mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
    z0 = _mm512_shuffle_epi8(z0, split);
    z1 = _mm512_shuffle_epi8(z1, split);
    out0 = _mm512_permutex2var_epi64(z0, _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14), z1);
    out1 = _mm512_permutex2var_epi64(z0, _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15), z1);
  }
  _mm512_storeu_si512(dst, out0);
  _mm512_storeu_si512(dst + 64, out1);
}

inline __m512i Bytes64(const __m512i* v) {
  const __m256i lo = _mm256_set_m128i(_mm512_cvtepi32_epi8(v[1]), _mm512_cvtepi32_epi8(v[0]));
  const __m256i hi = _mm256_set_m128i(_mm512_cvtepi32_epi8(v[3]), _mm512_cvtepi32_epi8(v[2]));
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

}  // namespace

void CqQuantizeI8Avx512(const float* x, size_t n, size_t cols, size_t ldx, size_t in_pad,
                        uint32_t code_bits, int8_t* q, float* scales) {
  const float c128 = 1.0f / std::sqrt(static_cast<float>(kI8Group));
  const __m512 c = _mm512_set1_ps(c128);
  const size_t groups = in_pad / kI8Group;
  for (size_t t = 0; t < n; ++t) {
    const float* xt = x + t * ldx;
    for (size_t g = 0; g < groups; ++g) {
      const size_t base = g * kI8Group;
      const size_t len = base < cols ? std::min(kI8Group, cols - base) : 0;
      __m512 v[8];
      for (size_t i = 0; i < 8; ++i) {
        const size_t have = len > 16 * i ? std::min<size_t>(16, len - 16 * i) : 0;
        v[i] = have == 0 ? _mm512_setzero_ps()
                         : _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << have) - 1),
                                                 xt + base + 16 * i);
        v[i] = InRegisterStage<1>(v[i]);
        v[i] = InRegisterStage<2>(v[i]);
        v[i] = InRegisterStage<4>(v[i]);
        v[i] = InRegisterStage<8>(v[i]);
      }
      for (size_t h = 1; h < 8; h *= 2)  // stages 16, 32, 64: vectors j and j + h
        for (size_t b = 0; b < 8; b += 2 * h)
          for (size_t j = b; j < b + h; ++j) {
            const __m512 lo = v[j], hi = v[j + h];
            v[j] = _mm512_add_ps(lo, hi);
            v[j + h] = _mm512_sub_ps(lo, hi);
          }
      __m512 amax = _mm512_setzero_ps();
      for (__m512& z : v) {
        z = _mm512_mul_ps(c, z);
        amax = _mm512_max_ps(amax, _mm512_abs_ps(z));
      }
      const float m = _mm512_reduce_max_ps(amax);
      const float s = m > 0.f ? m / 127.0f : 1.0f;
      const __m512 inv = _mm512_set1_ps(1.0f / s);
      scales[t * groups + g] = s;
      __m512i codes[8];
      for (size_t i = 0; i < 8; ++i)
        codes[i] = _mm512_cvttps_epi32(RoundHalfAway(_mm512_mul_ps(v[i], inv)));
      StoreLayout(code_bits, Bytes64(codes), Bytes64(codes + 4), q + t * in_pad + base);
    }
  }
}

void CqGemmI8Avx512(const CqMatrix& m, const I8Codebook& cb, const I8Acts& acts, size_t row_begin,
                    size_t row_end, float* y, size_t ldy) {
  GemmI8(m, cb, acts, row_begin, row_end, y, ldy);
}

int32_t DotI8Avx512(const int8_t* a, const int8_t* b, size_t n) { return DotI8(a, b, n); }

}  // namespace needle::kernels
