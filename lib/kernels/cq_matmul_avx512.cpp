// AVX-512 (F/BW/VL/DQ) version of the CQ product (cq_matmul.h). Sixteen codes at a time become
// levels with one variable shift and one 16-entry register table lookup (vpermps zmm), which
// covers every code width without masks or blends. Only called after the dispatcher's CPU check.
#include <cstring>

#include "kernels/cq_matmul.h"
#include "kernels/x86_intrin.h"

namespace needle::kernels {

namespace {

// Levels of 16 consecutive codes (2 * BITS bytes, byte aligned). vpermps only reads the low four
// bits of each index, so the table repeats the 2^BITS levels: entry i holds levels[i mod 2^BITS],
// and the bits of the following codes above a shifted code never need masking.
template <uint32_t BITS>
struct Decoder16 {
  static constexpr uint32_t kBits = BITS;
  __m512 table;
  __m512i shifts;
  explicit Decoder16(const CqMatrix& m) {
    alignas(64) float t[16];
    for (uint32_t i = 0; i < 16; ++i) t[i] = m.levels[i & ((1u << BITS) - 1)];
    table = _mm512_load_ps(t);
    // Codes 0-7 come from the first BITS bytes, codes 8-15 from the next BITS bytes (2-bit codes:
    // all 16 from one 32-bit word).
    alignas(64) int32_t s[16];
    for (int i = 0; i < 16; ++i) s[i] = BITS == 2 ? 2 * i : static_cast<int>(BITS) * (i % 8);
    shifts = _mm512_load_si512(s);
  }
  __m512 Sixteen(const uint8_t* p) const {
    __m512i words;
    if constexpr (BITS == 2) {
      uint32_t w;
      std::memcpy(&w, p, 4);
      words = _mm512_set1_epi32(static_cast<int>(w));
    } else {
      uint32_t w0 = 0, w1 = 0;
      std::memcpy(&w0, p, BITS);
      std::memcpy(&w1, p + BITS, BITS);
      words = _mm512_mask_set1_epi32(_mm512_set1_epi32(static_cast<int>(w0)), 0xFF00,
                                     static_cast<int>(w1));
    }
    return _mm512_permutexvar_ps(_mm512_srlv_epi32(words, shifts), table);
  }
};

// NR consecutive rows from r against exactly NT tokens (NR = 1 or NT = 1); y points at the
// output of (row r, token 0). Each (row, token) sum is one chain over the row's 16-code chunks
// in order whatever NR and NT are, so results do not depend on how rows are grouped (or
// threaded).
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
  __m512 acc[kAcc];
  for (size_t a = 0; a < kAcc; ++a) acc[a] = _mm512_setzero_ps();
  for (size_t g = 0; g < m.groups_per_row; ++g) {
    __m512 sum[kAcc];
    for (size_t a = 0; a < kAcc; ++a) sum[a] = _mm512_setzero_ps();
    const size_t base = g * m.group;
    for (size_t c = 0; c < m.group; c += 16) {
      if constexpr (NR == 1) {
        const __m512 w = dec.Sixteen(codes[0] + (base + c) / 8 * kBits);
        for (size_t t = 0; t < NT; ++t)
          sum[t] = _mm512_fmadd_ps(w, _mm512_loadu_ps(x_hat + t * m.in_pad + base + c), sum[t]);
      } else {
        const __m512 x = _mm512_loadu_ps(x_hat + base + c);
        for (size_t k = 0; k < NR; ++k)
          sum[k] = _mm512_fmadd_ps(dec.Sixteen(codes[k] + (base + c) / 8 * kBits), x, sum[k]);
      }
    }
    for (size_t a = 0; a < kAcc; ++a) {
      uint16_t nbits;
      std::memcpy(&nbits, norms[NR == 1 ? 0 : a] + 2 * g, 2);
      acc[a] = _mm512_fmadd_ps(_mm512_set1_ps(_cvtsh_ss(nbits)), sum[a], acc[a]);
    }
  }
  for (size_t a = 0; a < kAcc; ++a) y[NR == 1 ? a * ldy : a] = _mm512_reduce_add_ps(acc[a]);
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
  // 32 vector registers: 12 tokens keep 24 sums and accumulators plus the decoder's state.
  constexpr size_t kTile = 12;
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

void CqGemmAvx512(const CqMatrix& m, const float* x_hat, size_t n, size_t row_begin, size_t row_end,
                  float* y, size_t ldy) {
  // Groups of 8 (not 16) keep the AVX2 chunking; other groups the reference's.
  if (m.group % 16 != 0) return CqGemmAvx2(m, x_hat, n, row_begin, row_end, y, ldy);
  switch (m.code_bits) {
    case 2:
      return Gemm(Decoder16<2>(m), m, x_hat, n, row_begin, row_end, y, ldy);
    case 3:
      return Gemm(Decoder16<3>(m), m, x_hat, n, row_begin, row_end, y, ldy);
    case 4:
      return Gemm(Decoder16<4>(m), m, x_hat, n, row_begin, row_end, y, ldy);
    default:
      return CqGemmReference(m, x_hat, n, row_begin, row_end, y, ldy);
  }
}

}  // namespace needle::kernels
