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

// Levels of 8 consecutive codes (BITS bytes, byte aligned): variable shifts, then a register
// table lookup (vpermps; 4-bit codes use two tables and a blend). vpermps reads only the low three
// bits of an index and the blend only bit 3, so shifted codes need no mask: for 2-bit codes the
// table repeats the four levels (entry i holds levels[i mod 4]).
template <uint32_t BITS>
struct PermuteDecoder {
  static constexpr uint32_t kBits = BITS;
  __m256 lo, hi;
  __m256i shifts;
  explicit PermuteDecoder(const CqMatrix& m)
      : hi(_mm256_loadu_ps(m.levels + 8)),
        shifts(_mm256_setr_epi32(0, BITS, 2 * BITS, 3 * BITS, 4 * BITS, 5 * BITS, 6 * BITS,
                                 7 * BITS)) {
    float t[8];
    for (uint32_t i = 0; i < 8; ++i) t[i] = m.levels[BITS == 2 ? i % 4 : i];
    lo = _mm256_loadu_ps(t);
  }
  __m256 Eight(const uint8_t* p) const {
    uint32_t word = 0;
    std::memcpy(&word, p, BITS);
    const __m256i idx = _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(word)), shifts);
    __m256 w = _mm256_permutevar8x32_ps(lo, idx);
    if constexpr (BITS == 4) {
      const __m256 w_hi = _mm256_permutevar8x32_ps(hi, idx);
      w = _mm256_blendv_ps(w, w_hi, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
    }
    return w;
  }
};

// 2-bit codes through a byte table: lut[4*b + k] = level of code k of byte b, so 8 codes are two
// 16-byte loads. Same values as PermuteDecoder<2>, hence the same results.
struct ByteTableDecoder {
  static constexpr uint32_t kBits = 2;
  const float* lut;  // [256, 4], 16-byte aligned
  __m256 Eight(const uint8_t* p) const {
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_load_ps(lut + 4 * p[0])),
                                _mm_load_ps(lut + 4 * p[1]), 1);
  }
};

// NR consecutive rows from r against exactly NT tokens (NR = 1 or NT = 1); y points at the
// output of (row r, token 0). Each (row, token) sum is one chain over the row's chunks in order,
// whatever NR and NT are, so results do not depend on how rows are grouped (or threaded).
template <class Dec, size_t NR, size_t NT>
void RowTile(const Dec& dec, const CqMatrix& m, size_t r, const float* x_hat, float* y,
             size_t ldy) {
  static_assert(NR == 1 || NT == 1);
  constexpr uint32_t kBits = Dec::kBits;
  constexpr size_t kAcc = NR * NT;
  const uint8_t* codes[NR];
  const uint8_t* norms[NR];
  for (size_t k = 0; k < NR; ++k) {
    codes[k] = m.codes + (r + k) * m.row_bytes;
    norms[k] = m.norms + (r + k) * m.groups_per_row * 2;
  }
  __m256 acc[kAcc];
  for (size_t a = 0; a < kAcc; ++a) acc[a] = _mm256_setzero_ps();
  for (size_t g = 0; g < m.groups_per_row; ++g) {
    __m256 sum[kAcc];
    for (size_t a = 0; a < kAcc; ++a) sum[a] = _mm256_setzero_ps();
    const size_t base = g * m.group;
    for (size_t c = 0; c < m.group; c += 8) {
      if constexpr (NR == 1) {
        const __m256 w = dec.Eight(codes[0] + (base + c) / 8 * kBits);
        for (size_t t = 0; t < NT; ++t)
          sum[t] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x_hat + t * m.in_pad + base + c), sum[t]);
      } else {
        const __m256 x = _mm256_loadu_ps(x_hat + base + c);
        for (size_t k = 0; k < NR; ++k)
          sum[k] = _mm256_fmadd_ps(dec.Eight(codes[k] + (base + c) / 8 * kBits), x, sum[k]);
      }
    }
    for (size_t a = 0; a < kAcc; ++a) {
      uint16_t nbits;
      std::memcpy(&nbits, norms[NR == 1 ? 0 : a] + 2 * g, 2);
      acc[a] = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(nbits)), sum[a], acc[a]);
    }
  }
  for (size_t a = 0; a < kAcc; ++a) y[NR == 1 ? a * ldy : a] = HorizontalSum(acc[a]);
}

template <class Dec, size_t NT>
void Remainder(const Dec& dec, const CqMatrix& m, size_t r, const float* x_hat, size_t left,
               float* y, size_t ldy) {
  if constexpr (NT > 0) {
    if (left == NT) return RowTile<Dec, 1, NT>(dec, m, r, x_hat, y, ldy);
    return Remainder<Dec, NT - 1>(dec, m, r, x_hat, left, y, ldy);
  }
}

template <class Dec>
void Gemm(const Dec& dec, const CqMatrix& m, const float* x_hat, size_t n, size_t row_begin,
          size_t row_end, float* y, size_t ldy) {
  if (n == 1) {  // one token: rows in fours share the activation loads and run 4 FMA chains
    size_t r = row_begin;
    for (; r + 4 <= row_end; r += 4) RowTile<Dec, 4, 1>(dec, m, r, x_hat, y + (r - row_begin), ldy);
    for (; r < row_end; ++r) RowTile<Dec, 1, 1>(dec, m, r, x_hat, y + (r - row_begin), ldy);
    return;
  }
  // 4-bit codes need a second table register, so their tile is smaller.
  constexpr size_t kTile = Dec::kBits == 4 ? 6 : 8;
  for (size_t r = row_begin; r < row_end; ++r) {
    float* yr = y + (r - row_begin);
    size_t t0 = 0;
    for (; t0 + kTile <= n; t0 += kTile)
      RowTile<Dec, 1, kTile>(dec, m, r, x_hat + t0 * m.in_pad, yr + t0 * ldy, ldy);
    if (t0 < n)
      Remainder<Dec, kTile - 1>(dec, m, r, x_hat + t0 * m.in_pad, n - t0, yr + t0 * ldy, ldy);
  }
}

}  // namespace

void CqGemmAvx2(const CqMatrix& m, const float* x_hat, size_t n, size_t row_begin, size_t row_end,
                float* y, size_t ldy) {
  if (m.group % 8 != 0) return CqGemmReference(m, x_hat, n, row_begin, row_end, y, ldy);
  switch (m.code_bits) {
    case 2: {
      // The byte table costs ~5k instructions to build: worth it only when each decoded chunk
      // serves a tile of tokens over many rows. One token: shifts and the register table.
      if (n == 1 || (row_end - row_begin) * m.row_bytes < 1024)
        return Gemm(PermuteDecoder<2>(m), m, x_hat, n, row_begin, row_end, y, ldy);
      alignas(32) float lut[256 * 4];
      for (int b = 0; b < 256; ++b)
        for (int k = 0; k < 4; ++k) lut[4 * b + k] = m.levels[(b >> (2 * k)) & 3];
      return Gemm(ByteTableDecoder{lut}, m, x_hat, n, row_begin, row_end, y, ldy);
    }
    case 3:
      return Gemm(PermuteDecoder<3>(m), m, x_hat, n, row_begin, row_end, y, ldy);
    case 4:
      return Gemm(PermuteDecoder<4>(m), m, x_hat, n, row_begin, row_end, y, ldy);
    default:
      return CqGemmReference(m, x_hat, n, row_begin, row_end, y, ldy);
  }
}

}  // namespace needle::kernels
