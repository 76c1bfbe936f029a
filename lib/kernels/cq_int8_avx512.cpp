// AVX-512 (F/BW/VL/DQ) integer CQ kernels: the activation quantizer (shared by the VNNI gemm) and
// the vpmaddubsw gemm / dot of cq_int8_avx512_impl.h. Bit-exact with the scalar reference
// (cq_int8.cpp): the quantizer performs the reference's float operations on every element, 16
// elements at a time; built with -ffp-contract=off. Only called after the dispatcher's CPU check.
#include <algorithm>
#include <cmath>

#include "kernels/cq_int8.h"
#include "kernels/cq_int8_avx512_impl.h"
#include "kernels/cq_int8_x86.h"
#include "kernels/lane_algorithms.h"
#include "kernels/x86_lanes.h"

namespace needle::kernels {

namespace {

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
  QuantizeGroupsLanes<F32x16>(
      x, n, cols, ldx, in_pad, q, scales, [code_bits](const __m512* v, float inv, int8_t* dst) {
        const __m512 inv16 = _mm512_set1_ps(inv);
        __m512i codes[8];
        for (size_t i = 0; i < 8; ++i)
          codes[i] = _mm512_cvttps_epi32(F32x16::RoundHalfAway(_mm512_mul_ps(v[i], inv16)));
        StoreLayout(code_bits, Bytes64(codes), Bytes64(codes + 4), dst);
      });
}

void CqGemmI8Avx512(const CqMatrix& m, const I8Codebook& cb, const I8Acts& acts, size_t row_begin,
                    size_t row_end, float* y, size_t ldy) {
  GemmI8(m, cb, acts, row_begin, row_end, y, ldy);
}

int32_t DotI8Avx512(const int8_t* a, const int8_t* b, size_t n) { return DotI8(a, b, n); }

uint64_t MacPeakAvx512(uint64_t rounds) { return MacPeak(rounds); }

}  // namespace needle::kernels
