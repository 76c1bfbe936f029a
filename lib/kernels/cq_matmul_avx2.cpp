// AVX2 + FMA + F16C version of the CQ product (cq_matmul.h). Eight codes at a time are turned
// into levels with a variable shift and a register table lookup (vpermps); each decoded chunk is
// reused for a tile of tokens. Only called after the dispatcher's CPU check.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cq_matmul.h"

namespace needle::kernels {

namespace {

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Levels of the 8 codes starting at `p` (8 codes of BITS bits = BITS bytes, byte aligned).
template <uint32_t BITS>
inline __m256 DecodeEight(const uint8_t* p, __m256 table_lo, __m256 table_hi, __m256i shifts) {
  uint32_t word = 0;
  std::memcpy(&word, p, BITS);
  const __m256i idx = _mm256_and_si256(
      _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(word)), shifts),
      _mm256_set1_epi32((1 << BITS) - 1));
  __m256 w = _mm256_permutevar8x32_ps(table_lo, idx);
  if constexpr (BITS == 4) {
    const __m256 hi = _mm256_permutevar8x32_ps(table_hi, idx);
    w = _mm256_blendv_ps(w, hi, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
  } else {
    (void)table_hi;
  }
  return w;
}

template <uint32_t BITS, size_t NT>
// One row r against up to NT tokens (nt valid); y points at token 0's output for this row.
void RowTile(const CqMatrix& m, size_t r, const float* x_hat, size_t nt, float* y, size_t ldy) {
  const __m256 table_lo = _mm256_loadu_ps(m.levels);
  const __m256 table_hi = _mm256_loadu_ps(m.levels + 8);
  const __m256i shifts = _mm256_setr_epi32(0, BITS, 2 * BITS, 3 * BITS, 4 * BITS, 5 * BITS,
                                           6 * BITS, 7 * BITS);
  const uint8_t* codes = m.codes + r * m.row_bytes;
  const uint8_t* norms = m.norms + r * m.groups_per_row * 2;
  __m256 acc[NT];
  for (size_t t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (size_t g = 0; g < m.groups_per_row; ++g) {
    uint16_t nbits;
    std::memcpy(&nbits, norms + 2 * g, 2);
    const __m256 norm = _mm256_set1_ps(_cvtsh_ss(nbits));
    __m256 sum[NT];
    for (size_t t = 0; t < NT; ++t) sum[t] = _mm256_setzero_ps();
    const size_t base = g * m.group;
    for (size_t c = 0; c < m.group; c += 8) {
      const __m256 w = DecodeEight<BITS>(codes + (base + c) / 8 * BITS, table_lo, table_hi, shifts);
      for (size_t t = 0; t < NT; ++t)
        if (t < nt) sum[t] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x_hat + t * m.in_pad + base + c),
                                             sum[t]);
    }
    for (size_t t = 0; t < NT; ++t) acc[t] = _mm256_fmadd_ps(norm, sum[t], acc[t]);
  }
  for (size_t t = 0; t < nt; ++t) y[t * ldy] = HorizontalSum(acc[t]);
}

template <uint32_t BITS>
void Gemm(const CqMatrix& m, const float* x_hat, size_t n, size_t row_begin, size_t row_end,
          float* y, size_t ldy) {
  constexpr size_t kTile = 4;
  for (size_t r = row_begin; r < row_end; ++r) {
    size_t t0 = 0;
    for (; t0 + kTile <= n; t0 += kTile)
      RowTile<BITS, kTile>(m, r, x_hat + t0 * m.in_pad, kTile, y + t0 * ldy + (r - row_begin), ldy);
    if (t0 < n)
      RowTile<BITS, kTile>(m, r, x_hat + t0 * m.in_pad, n - t0, y + t0 * ldy + (r - row_begin),
                           ldy);
  }
}

}  // namespace

void CqGemmAvx2(const CqMatrix& m, const float* x_hat, size_t n, size_t row_begin,
                size_t row_end, float* y, size_t ldy) {
  if (m.group % 8 != 0) return CqGemmReference(m, x_hat, n, row_begin, row_end, y, ldy);
  switch (m.code_bits) {
    case 2: return Gemm<2>(m, x_hat, n, row_begin, row_end, y, ldy);
    case 3: return Gemm<3>(m, x_hat, n, row_begin, row_end, y, ldy);
    case 4: return Gemm<4>(m, x_hat, n, row_begin, row_end, y, ldy);
    default: return CqGemmReference(m, x_hat, n, row_begin, row_end, y, ldy);
  }
}

}  // namespace needle::kernels
