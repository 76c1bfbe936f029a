// AVX2 fast Walsh-Hadamard transform: the reference's butterflies in the same order, eight lanes
// at a time, so results are bit-identical to FwhtReference. Compiled with -mavx2 -mfma -mf16c.
#include <immintrin.h>

#include "kernels/fwht.h"

namespace needle::kernels {
namespace {

// Stages h = 1, 2, 4 inside one register. For lane i with bit h set the reference computes
// x[i - h] - x[i]: the partner (swapped copy) minus self; other lanes take self + partner.
inline __m256 InRegisterStages(__m256 v) {
  __m256 partner = _mm256_permute_ps(v, 0xB1);  // swap neighbours
  v = _mm256_blend_ps(_mm256_add_ps(v, partner), _mm256_sub_ps(partner, v), 0xAA);
  partner = _mm256_permute_ps(v, 0x4E);  // swap pairs
  v = _mm256_blend_ps(_mm256_add_ps(v, partner), _mm256_sub_ps(partner, v), 0xCC);
  partner = _mm256_permute2f128_ps(v, v, 0x01);  // swap 128-bit halves
  return _mm256_blend_ps(_mm256_add_ps(v, partner), _mm256_sub_ps(partner, v), 0xF0);
}

// All stages; with `normalize`, the scaling folded into the last one (same products).
void Transform(float* x, size_t n, bool normalize) {
  const __m256 scale = _mm256_set1_ps(FwhtScale(n));
  if (n == 8) {
    const __m256 v = InRegisterStages(_mm256_loadu_ps(x));
    _mm256_storeu_ps(x, normalize ? _mm256_mul_ps(v, scale) : v);
    return;
  }
  for (size_t i = 0; i < n; i += 8)
    _mm256_storeu_ps(x + i, InRegisterStages(_mm256_loadu_ps(x + i)));
  for (size_t h = 8; h < n; h *= 2) {
    const bool last = normalize && 2 * h == n;  // fold the final scaling into the last stage
    for (size_t block = 0; block < n; block += 2 * h) {
      for (size_t i = block; i < block + h; i += 8) {
        const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + h);
        __m256 sum = _mm256_add_ps(a, b), diff = _mm256_sub_ps(a, b);
        if (last) {
          sum = _mm256_mul_ps(sum, scale);
          diff = _mm256_mul_ps(diff, scale);
        }
        _mm256_storeu_ps(x + i, sum);
        _mm256_storeu_ps(x + i + h, diff);
      }
    }
  }
}

}  // namespace

void FwhtAvx2(float* x, size_t n) { Transform(x, n, true); }
void FwhtUnnormalizedAvx2(float* x, size_t n) { Transform(x, n, false); }

}  // namespace needle::kernels
