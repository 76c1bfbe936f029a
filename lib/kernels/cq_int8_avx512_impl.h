// AVX-512 integer CQ gemm and int8 dot (cq_int8.h), written once for two translation units:
// cq_int8_avx512.cpp (F/BW/VL/DQ: vpmaddubsw + vpmaddwd) and cq_int8_avx512vnni.cpp (+VNNI:
// vpdpbusd / vpdpwssd), selected by __AVX512VNNI__. Everything here has internal linkage so the two
// differently-compiled copies never meet at link time. Bit-exact: built with -ffp-contract=off.
//
// Tiles: 16 f32 lanes, lane l = r * T + t for R rows x T tokens (R * T <= 16). Per 128-group the
// R rows' codes are unpacked once (shifts, masks, one vpshufb table lookup) into int8 weights in
// the activation layout of cq_int8_x86.h and reused for the T tokens; the R*T int32 group dots are
// reduced into one vector and each lane runs its own f32 chain over the groups in order:
//   acc = norm_g * (cb_scale * (s_g * (float)I_g)) + acc
// vpdpbusd multiplies unsigned by signed bytes: VNNI tables hold w + 128 (unsigned) and subtract
// the exact 128 * sum(q) per (token, group) afterwards. Without VNNI the tables hold |w| and the
// sign of w moves onto the activation (masked negation; |w|, |q| <= 127, so vpmaddubsw's pair
// sums, at most 2 * 127 * 127, never saturate).
// With AVX512_VBMI (a third translation unit, cq_int8_avx512vbmi.cpp, VNNI + VBMI) the code->weight
// lookup is one vpermb over a 64-entry table that repeats the codebook, so the bits above a code
// need no mask: a 2-bit crumb or 4-bit nibble shifted to the bottom of its byte is looked up as is.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cq_int8.h"
#include "kernels/cq_int8_x86.h"
#include "kernels/x86_intrin.h"

namespace needle::kernels {
namespace {  // NOLINT(cert-dcl59-cpp, google-build-namespaces): one private copy per ISA file

#if defined(__AVX512VNNI__)
constexpr bool kVnni = true;
#else
constexpr bool kVnni = false;
#endif

#if defined(__AVX512VBMI__)
constexpr bool kVbmi = true;
#else
constexpr bool kVbmi = false;
#endif

static_assert(!kVbmi || kVnni, "the VBMI lookup leaves index bits the non-VNNI sign table needs");

constexpr size_t kLanes = 16;
// Groups whose token data (scales, VNNI offsets) and row norms are staged at a time; longer rows
// are walked in blocks, the chains resumed from y (an f32 store and reload is exact).
constexpr size_t kGroupBlock = 64;

// One 128-group of one row as int8 weights in layout order: bytes [0, 64) and [64, 128).
struct GroupWeights {
  __m512i w[2];      // VNNI: w + 128 (unsigned); otherwise |w|
  __mmask64 neg[2];  // without VNNI: lanes where w < 0
};

// Index vectors of the VBMI tables (Unpacker): byte k holds k mod 2^width, or crumb j of k.
template <uint32_t kWidth>
alignas(64) constexpr std::array<uint8_t, 64> kWideIndex = [] {
  std::array<uint8_t, 64> idx{};
  for (size_t k = 0; k < 64; ++k) idx[k] = static_cast<uint8_t>(k % (size_t{1} << kWidth));
  return idx;
}();
template <uint32_t kCrumb>
alignas(64) constexpr std::array<uint8_t, 64> kCrumbIndex = [] {
  std::array<uint8_t, 64> idx{};
  for (size_t k = 0; k < 64; ++k) idx[k] = static_cast<uint8_t>((k >> (2 * kCrumb)) & 3);
  return idx;
}();

template <uint32_t kBits>
class Unpacker {
 public:
  explicit Unpacker(const I8Codebook& cb) {
    alignas(16) uint8_t table[16], sign[16];
    for (size_t k = 0; k < 16; ++k) {
      const auto bits = static_cast<uint8_t>(cb.q[k]);  // two's complement; never -128
      const auto magnitude = (bits & 0x80) ? static_cast<uint8_t>(0u - bits) : bits;
      table[k] = kVnni ? static_cast<uint8_t>(bits ^ 0x80) : magnitude;  // w + 128 or |w|
      sign[k] = bits;
    }
    table_ = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(table)));
    sign_ = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(sign)));
    if constexpr (kVbmi) {
#if defined(__AVX512VBMI__)
      // Entry k = table[k mod 2^bits]: vpermb reads 6 index bits. 2-bit: also tables that read
      // crumb 1 or 2 of the 6-bit index, so a byte's crumbs 0..2 need no shift at all (crumb 3
      // is crumb 2 of the byte shifted right by 2). Built by byte permutes of the 16-entry table
      // with constant index vectors (a gemv call constructs its unpacker: scalar loops over the
      // 192 entries were ~1% of a decode).
      table64_ = _mm512_permutexvar_epi8(_mm512_load_si512(kWideIndex<kCodeWidth>.data()), table_);
      crumb_table_[0] = _mm512_permutexvar_epi8(_mm512_load_si512(kCrumbIndex<1>.data()), table_);
      crumb_table_[1] = _mm512_permutexvar_epi8(_mm512_load_si512(kCrumbIndex<2>.data()), table_);
#endif
    }
  }

  // `codes`: the group's 16 * kBits code bytes.
  void Group(const uint8_t* codes, GroupWeights* out) const {
    __m512i idx[2];
    if constexpr (kBits == 2) {
      // Both 256-bit halves hold the 32 code bytes; 16-bit shifts by (0 | 2) and (4 | 6) bring
      // crumbs j = 0..3 to the bottom of every byte: positions j * 32 + b.
      const __m512i c =
          _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes)));
      const __m512i mask = _mm512_set1_epi8(3);
      const __m512i shift01 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
      const __m512i shift23 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
      idx[0] = Mask(_mm512_srlv_epi16(c, shift01), mask);
      idx[1] = Mask(_mm512_srlv_epi16(c, shift23), mask);
    } else if constexpr (kBits == 4) {
      const __m512i c = _mm512_loadu_si512(codes);
      const __m512i mask = _mm512_set1_epi8(15);
      idx[0] = Mask(c, mask);
      idx[1] = Mask(_mm512_srli_epi16(c, 4), mask);
    } else {
      // 48 bytes = 16 chunks of 3 bytes (8 codes each). Chunk d goes to dword d: its bytes are
      // moved into place (dword permute, then an in-lane byte shuffle), then codes 0..3 and 4..7
      // of every chunk are spread to one byte each.
      const __m512i c = _mm512_maskz_loadu_epi8(0x0000FFFFFFFFFFFFull, codes);
      const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 0, 3, 4, 5, 0, 6, 7, 8, 0, 9, 10, 11, 0);
      const __m512i bytes = _mm512_broadcast_i32x4(
          _mm_setr_epi8(0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1));
      const __m512i x = _mm512_shuffle_epi8(_mm512_permutexvar_epi32(lanes, c), bytes);
      idx[0] = Spread3(x);
      idx[1] = Spread3(_mm512_srli_epi32(x, 12));
    }
    for (size_t h = 0; h < 2; ++h) {
      out->w[h] = Lookup(idx[h]);
      if constexpr (!kVnni) out->neg[h] = _mm512_movepi8_mask(_mm512_shuffle_epi8(sign_, idx[h]));
    }
  }

  // 2-bit: the weights of crumb j = 0..3 of every byte of c. VBMI: each byte's crumbs need no
  // shift or mask but the last (the 64-entry tables read the index bits they need); otherwise
  // each crumb is shifted to the bottom of its byte, masked and looked up in-lane.
  void Crumbs(__m512i c, __m512i& w0, __m512i& w1, __m512i& w2, __m512i& w3) const {
#if defined(__AVX512VBMI__)
    w0 = _mm512_permutexvar_epi8(c, table64_);
    w1 = _mm512_permutexvar_epi8(c, crumb_table_[0]);
    w2 = _mm512_permutexvar_epi8(c, crumb_table_[1]);
    w3 = _mm512_permutexvar_epi8(_mm512_srli_epi16(c, 2), crumb_table_[1]);
#else
    const __m512i mask = _mm512_set1_epi8(3);
    w0 = _mm512_shuffle_epi8(table_, _mm512_and_si512(c, mask));
    w1 = _mm512_shuffle_epi8(table_, _mm512_and_si512(_mm512_srli_epi16(c, 2), mask));
    w2 = _mm512_shuffle_epi8(table_, _mm512_and_si512(_mm512_srli_epi16(c, 4), mask));
    w3 = _mm512_shuffle_epi8(table_, _mm512_and_si512(_mm512_srli_epi16(c, 6), mask));
#endif
  }

  // 4-bit: the weights of the low and the high nibble of every byte of c (VBMI: the 64-entry
  // table ignores the index bits above the nibble; otherwise masked and looked up in-lane).
  void Nibbles(__m512i c, __m512i& lo, __m512i& hi) const {
    const __m512i mask = _mm512_set1_epi8(15);
    lo = Lookup(Mask(c, mask));
    hi = Lookup(Mask(_mm512_srli_epi16(c, 4), mask));
  }

  // The pair of groups (g, g + 1) at `codes` (g + 1 only if `second`; otherwise its half of the
  // weights is unspecified) as the four vectors W_0..W_3 (w[0].w[0..1], w[1].w[0..1]).
  void Pair(const uint8_t* codes, bool second, GroupWeights* out) const {
    __m512i idx[4];
    if constexpr (kBits == 2 && kVbmi) {
      const __m512i c = second ? _mm512_loadu_si512(codes) : _mm512_maskz_loadu_epi64(0x0F, codes);
      Crumbs(c, out[0].w[0], out[0].w[1], out[1].w[0], out[1].w[1]);
      return;
    }
    if constexpr (kBits == 2) {
      const __m512i c = second ? _mm512_loadu_si512(codes) : _mm512_maskz_loadu_epi64(0x0F, codes);
      const __m512i mask = _mm512_set1_epi8(3);
      idx[0] = Mask(c, mask);
      idx[1] = Mask(_mm512_srli_epi16(c, 2), mask);
      idx[2] = Mask(_mm512_srli_epi16(c, 4), mask);
      idx[3] = Mask(_mm512_srli_epi16(c, 6), mask);
    } else {
      const __m256i* p = reinterpret_cast<const __m256i*>(codes);
      __m512i x = _mm512_castsi256_si512(_mm256_loadu_si256(p));
      __m512i y = _mm512_castsi256_si512(_mm256_loadu_si256(p + 1));
      if (second) {
        x = _mm512_inserti64x4(x, _mm256_loadu_si256(p + 2), 1);
        y = _mm512_inserti64x4(y, _mm256_loadu_si256(p + 3), 1);
      }
      const __m512i mask = _mm512_set1_epi8(15);
      idx[0] = Mask(x, mask);
      idx[1] = Mask(_mm512_srli_epi16(x, 4), mask);
      idx[2] = Mask(y, mask);
      idx[3] = Mask(_mm512_srli_epi16(y, 4), mask);
    }
    for (size_t j = 0; j < 4; ++j) {
      out[j / 2].w[j % 2] = Lookup(idx[j]);
      if constexpr (!kVnni)
        out[j / 2].neg[j % 2] = _mm512_movepi8_mask(_mm512_shuffle_epi8(sign_, idx[j]));
    }
  }

 private:
  static constexpr uint32_t kCodeWidth = kBits == 4 ? 4 : kBits == 3 ? 3 : 2;

  // Codes at the bottom of each byte (bits above them: other codes) -> indices for Lookup.
  static __m512i Mask(__m512i v, __m512i mask) {
    if constexpr (kVbmi) {
      (void)mask;
      return v;
    } else {
      return _mm512_and_si512(v, mask);
    }
  }

  // Per byte: the table entry of its index (VBMI: low 6 bits; otherwise a masked 4-bit index).
  __m512i Lookup(__m512i idx) const {
#if defined(__AVX512VBMI__)
    return _mm512_permutexvar_epi8(idx, table64_);
#else
    return _mm512_shuffle_epi8(table_, idx);
#endif
  }

  // Four 3-bit fields at bits 0, 3, 6, 9 of every dword -> bytes 0..3 of that dword.
  static __m512i Spread3(__m512i v) {
    constexpr int kOrAnd = 0xF8;  // a | (b & c)
    __m512i r = _mm512_and_si512(v, _mm512_set1_epi32(0x7));
    r = _mm512_ternarylogic_epi32(r, _mm512_slli_epi32(v, 5), _mm512_set1_epi32(0x700), kOrAnd);
    r = _mm512_ternarylogic_epi32(r, _mm512_slli_epi32(v, 10), _mm512_set1_epi32(0x70000), kOrAnd);
    return _mm512_ternarylogic_epi32(r, _mm512_slli_epi32(v, 15), _mm512_set1_epi32(0x7000000),
                                     kOrAnd);
  }

  __m512i table_, sign_;
  __m512i table64_ = _mm512_setzero_si512();                                   // VBMI only
  __m512i crumb_table_[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};  // VBMI, 2-bit
};

// acc += int32 partial dots of one group's weights with 128 activations a (two 64-byte vectors).
inline __m512i DotGroup(__m512i acc, const GroupWeights& w, const int8_t* a) {
  const __m512i a0 = _mm512_loadu_si512(a), a1 = _mm512_loadu_si512(a + 64);
  if constexpr (kVnni) {
#if defined(__AVX512VNNI__)
    acc = _mm512_dpbusd_epi32(acc, w.w[0], a0);
    acc = _mm512_dpbusd_epi32(acc, w.w[1], a1);
#endif
    return acc;
  } else {
    const __m512i zero = _mm512_setzero_si512(), ones = _mm512_set1_epi16(1);
    const __m512i p0 = _mm512_maddubs_epi16(w.w[0], _mm512_mask_sub_epi8(a0, w.neg[0], zero, a0));
    const __m512i p1 = _mm512_maddubs_epi16(w.w[1], _mm512_mask_sub_epi8(a1, w.neg[1], zero, a1));
    return _mm512_add_epi32(
        acc, _mm512_add_epi32(_mm512_madd_epi16(p0, ones), _mm512_madd_epi16(p1, ones)));
  }
}

// int32 partial dots of a pair's weights W_0..W_3 with the staged activations a0..a3.
inline __m512i DotPair(const GroupWeights* w, __m512i a0, __m512i a1, __m512i a2, __m512i a3) {
  if constexpr (kVnni) {
#if defined(__AVX512VNNI__)
    // One chain per row: the 16 rows of a tile are independent chains, enough to hide the
    // latency, and a second chain would cost a zeroed register and an add per row.
    __m512i acc = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[0].w[0], a0);
    acc = _mm512_dpbusd_epi32(acc, w[0].w[1], a1);
    acc = _mm512_dpbusd_epi32(acc, w[1].w[0], a2);
    return _mm512_dpbusd_epi32(acc, w[1].w[1], a3);
#else
    return a0;
#endif
  } else {
    const __m512i zero = _mm512_setzero_si512(), ones = _mm512_set1_epi16(1);
    const __m512i p0 =
        _mm512_maddubs_epi16(w[0].w[0], _mm512_mask_sub_epi8(a0, w[0].neg[0], zero, a0));
    const __m512i p1 =
        _mm512_maddubs_epi16(w[0].w[1], _mm512_mask_sub_epi8(a1, w[0].neg[1], zero, a1));
    const __m512i p2 =
        _mm512_maddubs_epi16(w[1].w[0], _mm512_mask_sub_epi8(a2, w[1].neg[0], zero, a2));
    const __m512i p3 =
        _mm512_maddubs_epi16(w[1].w[1], _mm512_mask_sub_epi8(a3, w[1].neg[1], zero, a3));
    // |p| <= 2 * 127 * 127 per int16; the sum of two can overflow, so widen each first.
    return _mm512_add_epi32(
        _mm512_add_epi32(_mm512_madd_epi16(p0, ones), _mm512_madd_epi16(p1, ones)),
        _mm512_add_epi32(_mm512_madd_epi16(p2, ones), _mm512_madd_epi16(p3, ones)));
  }
}

// cq_int8.h's MacPeakFn for this file's product: vpdpbusd (VNNI) or vpmaddubsw + vpmaddwd +
// vpaddd, 64 MACs per chain step, 16 chains (the dot's latency times its throughput fits).
inline uint64_t MacPeak(uint64_t rounds) {
  constexpr size_t kChains = 16;
  __m512i acc[kChains];
  for (__m512i& v : acc) v = _mm512_setzero_si512();
  __m512i u = _mm512_set1_epi8(3);
  const __m512i s = _mm512_set1_epi8(-5);
  [[maybe_unused]] const __m512i ones = _mm512_set1_epi16(1);
  for (uint64_t r = 0; r < rounds; ++r)
    for (__m512i& v : acc) {
      __asm__ volatile("" : "+v"(u));  // opaque: no chain's product can be reused or hoisted
#if defined(__AVX512VNNI__)
      v = _mm512_dpbusd_epi32(v, u, s);
#else
      v = _mm512_add_epi32(v, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), ones));
#endif
    }
  __m512i sum = acc[0];
  for (size_t j = 1; j < kChains; ++j) sum = _mm512_xor_si512(sum, acc[j]);
  __asm__ volatile("" : : "v"(sum));  // the chains must not be optimized away
  return rounds * kChains * 64;
}

// Lane l of the result = sum of the 16 int32 lanes of v[l].
inline __m512i Reduce16(const __m512i* v) {
  __m512i b[8], c[4], d[2];
  for (size_t i = 0; i < 8; ++i)
    b[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]),
                            _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
  for (size_t i = 0; i < 4; ++i)
    c[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(b[2 * i], b[2 * i + 1]),
                            _mm512_unpackhi_epi64(b[2 * i], b[2 * i + 1]));
  for (size_t i = 0; i < 2; ++i)
    d[i] = _mm512_add_epi32(_mm512_shuffle_i32x4(c[2 * i], c[2 * i + 1], 0x88),
                            _mm512_shuffle_i32x4(c[2 * i], c[2 * i + 1], 0xDD));
  return _mm512_add_epi32(_mm512_shuffle_i32x4(d[0], d[1], 0x88),
                          _mm512_shuffle_i32x4(d[0], d[1], 0xDD));
}

// Token data of one (token tile, group block), transposed so a group's values are one load:
// [group - g0][t] for t < T (other columns zero).
struct TokenBlock {
  alignas(64) float scale[kGroupBlock][kLanes];
  alignas(64) int32_t offset[kGroupBlock][kLanes];  // VNNI: 128 * sum of the group's q
};

void StageTokens(const I8Acts& acts, size_t groups, size_t t0, size_t tokens, size_t g0, size_t g1,
                 TokenBlock* tb) {
  for (size_t g = g0; g < g1; ++g) {
    for (size_t t = 0; t < kLanes; ++t) {
      tb->scale[g - g0][t] = t < tokens ? acts.scales[(t0 + t) * groups + g] : 0.f;
      tb->offset[g - g0][t] = 0;
    }
    if constexpr (kVnni) {
#if defined(__AVX512VNNI__)
      const __m512i ones = _mm512_set1_epi8(1);
      for (size_t t = 0; t < tokens; ++t) {
        const int8_t* q = acts.q + (t0 + t) * acts.in_pad + g * kI8Group;
        __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, _mm512_loadu_si512(q));
        s = _mm512_dpbusd_epi32(s, ones, _mm512_loadu_si512(q + 64));
        tb->offset[g - g0][t] = 128 * _mm512_reduce_add_epi32(s);
      }
#endif
    }
  }
}

// R f16 values -> lanes 0..R-1 (the others unspecified).
template <size_t R>
inline __m512 LoadHalves(const uint16_t* p) {
  if constexpr (R == 16) {
    return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
  } else if constexpr (R == 8) {
    return _mm512_castps256_ps512(
        _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p))));
  } else {
    uint64_t bits = 0;
    std::memcpy(&bits, p, R * 2);
    return _mm512_castps128_ps512(_mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<int64_t>(bits))));
  }
}

struct GemmArgs {
  const CqMatrix* m;
  const I8Acts* acts;
  float cb_scale;
  size_t row_begin;
  float* y;
  size_t ldy;
};

// Rows [r0, r0 + rows) (rows <= R; missing rows repeat the last one and are not stored) against
// tokens [t0, t0 + T), groups [g0, g1) of the chains (resumed from y when g0 > 0).
template <uint32_t kBits, size_t T, size_t R>
void RowTile(const Unpacker<kBits>& unpack, const GemmArgs& a, const TokenBlock& tb, size_t t0,
             size_t g0, size_t g1, size_t r0, size_t rows) {
  static_assert(R * T <= kLanes);
  const CqMatrix& m = *a.m;
  const size_t in_pad = a.acts->in_pad;
  const uint8_t* codes[R];
  alignas(64) uint16_t norms[kGroupBlock][R];
  for (size_t r = 0; r < R; ++r) {
    const size_t row = r0 + std::min(r, rows - 1);
    codes[r] = m.codes + row * m.row_bytes;
    const uint8_t* row_norms = m.norms + row * m.groups_per_row * 2;
    for (size_t g = g0; g < g1; ++g) std::memcpy(&norms[g - g0][r], row_norms + 2 * g, 2);
  }
  alignas(64) int32_t lane_token[kLanes], lane_row[kLanes];
  for (size_t l = 0; l < kLanes; ++l) {
    lane_token[l] = static_cast<int32_t>(l % T);
    lane_row[l] = static_cast<int32_t>(std::min(l / T, R - 1));
  }
  const __m512i idx_t = _mm512_load_si512(lane_token), idx_r = _mm512_load_si512(lane_row);
  const __m512 cb = _mm512_set1_ps(a.cb_scale);
  alignas(64) float out[kLanes] = {};
  auto y_at = [&](size_t r, size_t t) { return a.y + (t0 + t) * a.ldy + (r0 + r - a.row_begin); };
  if (g0 > 0)
    for (size_t r = 0; r < rows; ++r)
      for (size_t t = 0; t < T; ++t) out[r * T + t] = *y_at(r, t);
  __m512 acc = _mm512_load_ps(out);
  const int8_t* q = a.acts->q + t0 * in_pad;
  for (size_t g = g0; g < g1; ++g) {
    __m512i dots[kLanes];
    for (__m512i& d : dots) d = _mm512_setzero_si512();
    const int8_t* qg = q + g * kI8Group;
#pragma GCC unroll 16
    for (size_t r = 0; r < R; ++r) {
      GroupWeights w;
      unpack.Group(codes[r] + g * 16 * kBits, &w);
#pragma GCC unroll 16
      for (size_t t = 0; t < T; ++t)
        dots[r * T + t] = DotGroup(dots[r * T + t], w, qg + t * in_pad);
    }
    __m512i sum = Reduce16(dots);
    if constexpr (kVnni)
      sum = _mm512_sub_epi32(sum,
                             _mm512_permutexvar_epi32(idx_t, _mm512_load_si512(tb.offset[g - g0])));
    const __m512 s = _mm512_permutexvar_ps(idx_t, _mm512_load_ps(tb.scale[g - g0]));
    const __m512 norm = _mm512_permutexvar_ps(idx_r, LoadHalves<R>(norms[g - g0]));
    acc = _mm512_add_ps(
        _mm512_mul_ps(norm, _mm512_mul_ps(cb, _mm512_mul_ps(s, _mm512_cvtepi32_ps(sum)))), acc);
  }
  _mm512_store_ps(out, acc);
  for (size_t r = 0; r < rows; ++r)
    for (size_t t = 0; t < T; ++t) *y_at(r, t) = out[r * T + t];
}

// All rows of the call for one token tile: full tiles of R = 16 / T rows, then the leftover rows
// with the smallest power-of-two tile that holds them.
template <uint32_t kBits, size_t T, size_t R = kLanes / T>
void Rows(const Unpacker<kBits>& unpack, const GemmArgs& a, const TokenBlock& tb, size_t t0,
          size_t g0, size_t g1, size_t r0, size_t r1) {
  if constexpr (R == kLanes / T) {
    for (; r0 + R <= r1; r0 += R) RowTile<kBits, T, R>(unpack, a, tb, t0, g0, g1, r0, R);
  }
  if (r0 >= r1) return;
  if constexpr (R > 1) {
    if (r1 - r0 <= R / 2) return Rows<kBits, T, R / 2>(unpack, a, tb, t0, g0, g1, r0, r1);
  }
  RowTile<kBits, T, R>(unpack, a, tb, t0, g0, g1, r0, r1 - r0);
}

// ---- One token (decode GEMV): two groups per accumulator ----
//
// For n = 1 every row's accumulator holds a pair of groups (g, g + 1): int32 lanes 0..7 collect
// group g and lanes 8..15 group g + 1, so one 16-row reduction serves two groups. The weights of a
// pair are four vectors W_j whose lower 256 bits come from group g and upper from g + 1; the
// token's activations are restaged once per call to match (PairActs). 2-bit: W_j = crumb j of the
// 64 code bytes of the pair (positions 32 j + b of each group); 4-bit: X = first 32 code bytes of
// g and g + 1, Y = last 32; W = lo(X), hi(X), lo(Y), hi(Y) (positions b, 64 + b, 32 + b, 96 + b).

// Offset (in the group's 128 activation bytes) of the 32 bytes paired with W_j.
template <uint32_t kBits>
constexpr size_t PairOffset(size_t j) {
  if constexpr (kBits == 2) {
    return 32 * j;
  } else {
    return j == 0 ? 0 : j == 1 ? 64 : j == 2 ? 32 : 96;
  }
}

// The token's staged data for one block of groups [g0, g1): activations of group pair p in a[p],
// scale and VNNI offset per group.
struct PairActs {
  alignas(64) int8_t a[kGroupBlock / 2][4][64];
  alignas(64) float scale[kGroupBlock];
  alignas(64) int32_t offset[kGroupBlock];
};

template <uint32_t kBits>
void StagePairs(const I8Acts& acts, size_t groups, size_t g0, size_t g1, PairActs* pa) {
  for (size_t g = g0; g < g1; ++g) {
    const int8_t* q = acts.q + g * kI8Group;
    const size_t p = (g - g0) / 2, half = (g - g0) % 2;
    for (size_t j = 0; j < 4; ++j)
      std::memcpy(pa->a[p][j] + 32 * half, q + PairOffset<kBits>(j), 32);
    pa->scale[g - g0] = acts.scales[g];
    pa->offset[g - g0] = 0;
    if constexpr (kVnni) {
#if defined(__AVX512VNNI__)
      const __m512i ones = _mm512_set1_epi8(1);
      __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, _mm512_loadu_si512(q));
      s = _mm512_dpbusd_epi32(s, ones, _mm512_loadu_si512(q + 64));
      pa->offset[g - g0] = 128 * _mm512_reduce_add_epi32(s);
#endif
    }
  }
  if ((g1 - g0) % 2 != 0)  // the last pair's second half: zero activations
    for (size_t j = 0; j < 4; ++j) std::memset(pa->a[(g1 - g0) / 2][j] + 32, 0, 32);
  (void)groups;
}

// The first reduction step of rows 2i and 2i + 1 (accumulators v0, v1: lanes 0..7 group g,
// 8..15 group g + 1): b[i] of ReducePairs.
inline __m512i ReduceRowPair(__m512i v0, __m512i v1) {
  return _mm512_add_epi32(_mm512_unpacklo_epi32(v0, v1), _mm512_unpackhi_epi32(v0, v1));
}

// 16 accumulators, already folded pairwise by ReduceRowPair into b[0..7] -> lane r of out[0] =
// row r's group-g sum, of out[1] its group g + 1 sum.
inline void ReducePairs(const __m512i* b, __m512i* out) {
  __m512i c[4], d[2];
  for (size_t i = 0; i < 4; ++i)  // 128-bit lane k: rows 4i..4i+3, partial over lane k
    c[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(b[2 * i], b[2 * i + 1]),
                            _mm512_unpackhi_epi64(b[2 * i], b[2 * i + 1]));
  for (size_t i = 0; i < 2; ++i)  // [g: rows 8i..8i+3, g+1: same, g: 8i+4..8i+7, g+1: same]
    d[i] = _mm512_add_epi32(_mm512_shuffle_i32x4(c[2 * i], c[2 * i + 1], 0x88),
                            _mm512_shuffle_i32x4(c[2 * i], c[2 * i + 1], 0xDD));
  out[0] = _mm512_shuffle_i32x4(d[0], d[1], 0x88);
  out[1] = _mm512_shuffle_i32x4(d[0], d[1], 0xDD);
}

// One step of the chains: the 16 rows' pair (g, g + 1) (g only unless kSecond), its norms in
// lanes 0..15 (group g) and 16..31 (group g + 1) of `norms` as f16.
template <uint32_t kBits, bool kSecond>
inline __m512 PairStep(const Unpacker<kBits>& unpack, const uint8_t* codes, size_t row_bytes,
                       const PairActs& pa, size_t i, __m512i norms, __m512 cb, __m512 acc) {
  const auto& act = pa.a[i / 2];
  const __m512i a0 = _mm512_load_si512(act[0]), a1 = _mm512_load_si512(act[1]);
  const __m512i a2 = _mm512_load_si512(act[2]), a3 = _mm512_load_si512(act[3]);
  // Rows two at a time, folded at once: at most two row accumulators are live (16 were, and
  // the tile spilled them to the stack).
  __m512i folded[kLanes / 2];
#pragma GCC unroll 8
  for (size_t i = 0; i < kLanes / 2; ++i) {
    GroupWeights w[2][2];
    unpack.Pair(codes + 2 * i * row_bytes, kSecond, w[0]);
    unpack.Pair(codes + (2 * i + 1) * row_bytes, kSecond, w[1]);
    folded[i] = ReduceRowPair(DotPair(w[0], a0, a1, a2, a3), DotPair(w[1], a0, a1, a2, a3));
  }
  __m512i sum[2];
  ReducePairs(folded, sum);
#pragma GCC unroll 2
  for (size_t h = 0; h < (kSecond ? 2 : 1); ++h) {
    __m512i s32 = sum[h];
    if constexpr (kVnni) s32 = _mm512_sub_epi32(s32, _mm512_set1_epi32(pa.offset[i + h]));
    const __m512 s = _mm512_set1_ps(pa.scale[i + h]);
    const __m512 norm = _mm512_cvtph_ps(h == 0 ? _mm512_castsi512_si256(norms)
                                               : _mm512_extracti64x4_epi64(norms, 1));
    acc = _mm512_add_ps(
        _mm512_mul_ps(norm, _mm512_mul_ps(cb, _mm512_mul_ps(s, _mm512_cvtepi32_ps(s32)))), acc);
  }
  return acc;
}

// Tiles ahead whose code bytes and norms a single-token tile prefetches.
constexpr size_t kPrefetchTiles = 2;

// A mask of the first `words` (<= 32) 16-bit lanes.
inline __mmask32 WordMask(size_t words) {
  return words >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << words) - 1u);
}

// Rows [r0, r0 + 16) (all present: codes and norms of consecutive rows are contiguous), the one
// token, groups [g0, g1) of the chains (resumed from y when g0 > 0).
template <uint32_t kBits>
void PairTile(const Unpacker<kBits>& unpack, const GemmArgs& a, const PairActs& pa, size_t g0,
              size_t g1, size_t r0) {
  const CqMatrix& m = *a.m;
  const size_t groups = m.groups_per_row;
  const uint8_t* codes = m.codes + r0 * m.row_bytes;
  const uint8_t* norms = m.norms + r0 * groups * 2;
  // Row r's two norms of a pair are one dword at r * groups * 2 + 2 g.
  const __m512i nidx =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int32_t>(groups * 2)));
  alignas(64) static constexpr uint16_t kSplit[32] = {0,  2,  4,  6,  8,  10, 12, 14, 16, 18, 20,
                                                      22, 24, 26, 28, 30, 1,  3,  5,  7,  9,  11,
                                                      13, 15, 17, 19, 21, 23, 25, 27, 29, 31};
  const __m512i split = _mm512_load_si512(kSplit);
  const __m512 cb = _mm512_set1_ps(a.cb_scale);
  float* const yr = a.y + (r0 - a.row_begin);
  // The weights stream from L3 or memory: a tile kPrefetchTiles ahead has its code bytes (16
  // contiguous rows) and norms requested now, so they arrive while this tile computes.
  if (g0 == 0) {
    const size_t ahead = r0 + kPrefetchTiles * kLanes;
    if (ahead < m.rows) {
      const size_t rows = std::min(kLanes, m.rows - ahead);
      const uint8_t* p = m.codes + ahead * m.row_bytes;
      for (size_t off = 0; off < rows * m.row_bytes; off += 64)
        _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
      const uint8_t* n = m.norms + ahead * groups * 2;
      for (size_t off = 0; off < rows * groups * 2; off += 64)
        _mm_prefetch(reinterpret_cast<const char*>(n + off), _MM_HINT_T0);
    }
  }
  __m512 acc = g0 > 0 ? _mm512_loadu_ps(yr) : _mm512_setzero_ps();
  size_t g = g0;
  if (groups <= 4) {
    // The tile's norms are at most 64 f16 in a row (16 rows x groups): two loads, then one word
    // permute per pair picks row r's norm of group g into word r and of g + 1 into word 16 + r
    // (a gather here cost more than the pair's dot products).
    const size_t words = kLanes * groups;
    const __m512i lo = _mm512_maskz_loadu_epi16(WordMask(std::min<size_t>(words, 32)), norms);
    const __m512i hi = words > 32 ? _mm512_maskz_loadu_epi16(WordMask(words - 32), norms + 64) : lo;
    alignas(64) uint16_t first[32];
    for (size_t l = 0; l < 32; ++l) first[l] = static_cast<uint16_t>((l % 16) * groups + l / 16);
    const __m512i base = _mm512_load_si512(first);
    for (; g + 2 <= g1; g += 2) {
      const __m512i idx = _mm512_add_epi16(base, _mm512_set1_epi16(static_cast<int16_t>(g)));
      acc = PairStep<kBits, true>(unpack, codes + g * 16 * kBits, m.row_bytes, pa, g - g0,
                                  _mm512_permutex2var_epi16(lo, idx, hi), cb, acc);
    }
  }
  for (; g + 2 <= g1; g += 2) {
    const __m512i n2 = _mm512_i32gather_epi32(nidx, norms + 2 * g, 1);
    acc = PairStep<kBits, true>(unpack, codes + g * 16 * kBits, m.row_bytes, pa, g - g0,
                                _mm512_permutexvar_epi16(split, n2), cb, acc);
  }
  if (g < g1) {
    alignas(64) uint16_t n1[kLanes];
    for (size_t r = 0; r < kLanes; ++r) std::memcpy(&n1[r], norms + (r * groups + g) * 2, 2);
    acc = PairStep<kBits, false>(
        unpack, codes + g * 16 * kBits, m.row_bytes, pa, g - g0,
        _mm512_castsi256_si512(_mm256_load_si256(reinterpret_cast<const __m256i*>(n1))), cb, acc);
  }
  _mm512_storeu_ps(yr, acc);
}

template <uint32_t kBits>
void GemvPairs(const Unpacker<kBits>& unpack, const GemmArgs& a, size_t row_end) {
  const size_t groups = a.m->groups_per_row;
  PairActs pa;
  for (size_t g0 = 0; g0 < groups; g0 += kGroupBlock) {
    const size_t g1 = std::min(groups, g0 + kGroupBlock);
    StagePairs<kBits>(*a.acts, groups, g0, g1, &pa);
    for (size_t r0 = a.row_begin; r0 < row_end; r0 += kLanes)
      PairTile<kBits>(unpack, a, pa, g0, g1, r0);
  }
}

#if defined(__AVX512VNNI__)
// ---- One token from row-dword tiles (CqTileLayout::kRowDwords, VNNI): rows in lanes ----
//
// Lane p of every vector is row p of a 16-row tile. Vector d of a (tile, group) block holds each
// row's code bytes 4d..4d+3; crumb c of it, looked up (Unpacker::Crumbs), is the 16 rows' weights
// (w + 128) at layout positions 4i..4i+3 with i = d + 8c (I8LayoutPositionX86: code byte b holds
// the crumb-j columns at position 32 j + b). vpdpbusd with the token's activation dword i
// broadcast adds each row's four products into its own lane, so the group dots need no reduction
// across lanes (the pair kernel above spends a third of its shuffles on that). Four chains per
// group (one per crumb), summed exactly; then each lane runs its row's f32 chain over the groups.

// Whether rows [row_begin, row_end) of m are whole row-dword tiles this file can read.
inline bool RowDwordTiles(const CqMatrix& m, size_t row_begin, size_t row_end, uint32_t bits = 2) {
  return m.tiles != nullptr && m.tile_layout == CqTileLayout::kRowDwords && m.code_bits == bits &&
         row_begin % kCqTileRows == 0 && row_end % kCqTileRows == 0;
}

// One (tile, group) block's 16 int32 row dots against the token's group q (offset: 128 * sum(q)).
// 2-bit: vector d's crumbs c are the weights at positions 4 (d + 8c)..; 4-bit (the LM head): 16
// vectors, vector d's low nibbles the weights at 4d.., its high nibbles those at 64 + 4d..
// (I8LayoutPositionX86). Four chains, summed exactly.
template <uint32_t kBits>
__m512i RowDwordDots(const Unpacker<kBits>& unpack, const uint8_t* block, const int8_t* q,
                     int32_t offset) {
  __m512i s[4];
  for (__m512i& v : s) v = _mm512_setzero_si512();
  if constexpr (kBits == 2) {
#pragma GCC unroll 8
    for (size_t d = 0; d < 8; ++d) {
      __m512i w[4];
      unpack.Crumbs(_mm512_loadu_si512(block + 64 * d), w[0], w[1], w[2], w[3]);
      for (size_t c = 0; c < 4; ++c) {
        int32_t word;
        std::memcpy(&word, q + 4 * (d + 8 * c), 4);
        s[c] = _mm512_dpbusd_epi32(s[c], w[c], _mm512_set1_epi32(word));
      }
    }
  } else {
#pragma GCC unroll 16
    for (size_t d = 0; d < 16; ++d) {
      __m512i lo, hi;
      unpack.Nibbles(_mm512_loadu_si512(block + 64 * d), lo, hi);
      int32_t word_lo, word_hi;
      std::memcpy(&word_lo, q + 4 * d, 4);
      std::memcpy(&word_hi, q + 64 + 4 * d, 4);
      s[d % 2] = _mm512_dpbusd_epi32(s[d % 2], lo, _mm512_set1_epi32(word_lo));
      s[2 + d % 2] = _mm512_dpbusd_epi32(s[2 + d % 2], hi, _mm512_set1_epi32(word_hi));
    }
  }
  return _mm512_sub_epi32(
      _mm512_add_epi32(_mm512_add_epi32(s[0], s[1]), _mm512_add_epi32(s[2], s[3])),
      _mm512_set1_epi32(offset));
}

template <uint32_t kBits>
void GemvRowDwords(const Unpacker<kBits>& unpack, const GemmArgs& a, size_t row_end) {
  static_assert(kBits == 2 || kBits == 4);
  constexpr size_t kBlockBytes = kBits == 4 ? kCqRowDword4BlockBytes : kCqRowDwordBlockBytes;
  constexpr size_t kNormsAt = kBits * kI8Group / 8 * kCqTileRows;  // after the code vectors
  const CqMatrix& m = *a.m;
  const I8Acts& acts = *a.acts;
  const size_t groups = m.groups_per_row;
  const __m512 cb = _mm512_set1_ps(a.cb_scale);
  const __m512i ones = _mm512_set1_epi8(1);
  alignas(64) int32_t offset[kGroupBlock];
  for (size_t g0 = 0; g0 < groups; g0 += kGroupBlock) {
    const size_t g1 = std::min(groups, g0 + kGroupBlock);
    for (size_t g = g0; g < g1; ++g) {  // 128 * sum(q) of the group (vpdpbusd's +128 bias)
      const int8_t* q = acts.q + g * kI8Group;
      __m512i sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, _mm512_loadu_si512(q));
      sum = _mm512_dpbusd_epi32(sum, ones, _mm512_loadu_si512(q + 64));
      offset[g - g0] = 128 * _mm512_reduce_add_epi32(sum);
    }
    for (size_t r0 = a.row_begin; r0 < row_end; r0 += kCqTileRows) {
      const uint8_t* tile = m.tiles + r0 / kCqTileRows * groups * kBlockBytes;
      float* const yr = a.y + (r0 - a.row_begin);
      __m512 acc = g0 > 0 ? _mm512_loadu_ps(yr) : _mm512_setzero_ps();
      for (size_t g = g0; g < g1; ++g) {
        const uint8_t* block = tile + g * kBlockBytes;
        const __m512i dots =
            RowDwordDots<kBits>(unpack, block, acts.q + g * kI8Group, offset[g - g0]);
        const __m512 norm =
            _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + kNormsAt)));
        const __m512 scale = _mm512_set1_ps(acts.scales[g]);
        acc = _mm512_add_ps(
            _mm512_mul_ps(norm, _mm512_mul_ps(cb, _mm512_mul_ps(scale, _mm512_cvtepi32_ps(dots)))),
            acc);
      }
      _mm512_storeu_ps(yr, acc);
    }
  }
}
#endif

#if defined(__AVX512VNNI__)
// ---- Several tokens with VNNI (prefill GEMM): tokens in lanes ----
//
// Lane t of a vector is token t of a 16-token tile (one or two tiles per pass). Per row and
// 128-group the row's weights are unpacked once (w + 128, layout order) into a small buffer; each
// dword of it (4 weights) is broadcast and multiplied by the 4 activations at those layout
// positions of 16 tokens (vpdpbusd: unsigned weights x signed activations), so every (row, token)
// group dot ends in its own lane with no horizontal reduction: 32 vpdpbusd per row, group and
// tile, each a full 64 multiply-adds. The exact 128 * sum(q) of each (token, group) is subtracted
// at the end of the group, then each lane runs its f32 chain over the groups in order.

constexpr size_t kLaneRows = 8;        // rows per tile (accumulators: rows x token tiles)
constexpr size_t kLaneGroupBlock = 8;  // groups staged at a time (32 KB of activations)
constexpr size_t kLaneQuads = kI8Group / 4;

// The token tiles' data for one block of groups: quad i (layout positions 4i..4i+3) of token
// lane l of tile h in a[g][i][h], the scale and 128 * sum(q) of each (group, token).
struct LaneActs {
  alignas(64) int32_t a[kLaneGroupBlock][kLaneQuads][2][kLanes];
  alignas(64) float scale[kLaneGroupBlock][2][kLanes];
  alignas(64) int32_t offset[kLaneGroupBlock][2][kLanes];
};

void StageLanes(const I8Acts& acts, size_t groups, size_t t0, size_t tokens, size_t g0, size_t g1,
                LaneActs* la) {
  for (size_t g = g0; g < g1; ++g) {
    for (size_t l = 0; l < 2 * kLanes; ++l) {
      const size_t h = l / kLanes, t = l % kLanes;
      if (l >= tokens) {
        for (size_t i = 0; i < kLaneQuads; ++i) la->a[g - g0][i][h][t] = 0;
        la->scale[g - g0][h][t] = 0.f;
        la->offset[g - g0][h][t] = 0;
        continue;
      }
      const int8_t* q = acts.q + (t0 + l) * acts.in_pad + g * kI8Group;
      int32_t sum = 0;
      for (size_t i = 0; i < kLaneQuads; ++i) {
        std::memcpy(&la->a[g - g0][i][h][t], q + 4 * i, 4);
        sum += q[4 * i] + q[4 * i + 1] + q[4 * i + 2] + q[4 * i + 3];
      }
      la->scale[g - g0][h][t] = acts.scales[(t0 + l) * groups + g];
      la->offset[g - g0][h][t] = 128 * sum;
    }
  }
}

// One group of a lane tile's kLaneRows rows: row r's weight dword for quad i at
// w + r * kRowStride + i * kQuadStride; the group's dots against the token tiles, then each
// chain's step into out[r][h] (norm[r]: the rows' group norms). Not inlined: its accumulators get
// the registers to themselves (inlined into the tile, GCC spilled them).
template <size_t kTiles, size_t kRowStride, size_t kQuadStride>
[[gnu::noinline]] void LaneGroup(const uint8_t* w, const LaneActs& la, size_t gi, const float* norm,
                                 __m512 cb, float (*out)[kTiles][kLanes]) {
  constexpr size_t R = kLaneRows;
  __m512i acc[R][kTiles];
  for (auto& row : acc)
    for (__m512i& v : row) v = _mm512_setzero_si512();
  const auto& quads = la.a[gi];
  for (size_t i = 0; i < kLaneQuads; ++i) {
    __m512i x[kTiles];
    for (size_t h = 0; h < kTiles; ++h) x[h] = _mm512_load_si512(quads[i][h]);
#pragma GCC unroll 8
    for (size_t r = 0; r < R; ++r) {
      int32_t word;
      std::memcpy(&word, w + r * kRowStride + i * kQuadStride, 4);
      const __m512i wv = _mm512_set1_epi32(word);
      for (size_t h = 0; h < kTiles; ++h) acc[r][h] = _mm512_dpbusd_epi32(acc[r][h], wv, x[h]);
    }
  }
  for (size_t h = 0; h < kTiles; ++h) {
    const __m512i offset = _mm512_load_si512(la.offset[gi][h]);
    const __m512 s = _mm512_load_ps(la.scale[gi][h]);
    for (size_t r = 0; r < R; ++r) {
      const __m512 dot = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[r][h], offset));
      _mm512_store_ps(out[r][h],
                      _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(norm[r]),
                                                  _mm512_mul_ps(cb, _mm512_mul_ps(s, dot))),
                                    _mm512_load_ps(out[r][h])));
    }
  }
}

// Token j's 8 values rows[0..7][j] to dst(j) (the rows of row_mask) for j < tokens: an 8 x 16
// transpose by unpacks and permutes (a gather per token was ~3% of a prefill).
template <class Dst>
inline void StoreTokenRows(const __m512 rows[8], size_t tokens, __mmask8 row_mask, const Dst& dst) {
  // Per 128-bit lane q (tokens 4q..4q+3): a_k = rows 2k, 2k+1 of tokens 4q, 4q+1; b_k of 4q+2,
  // 4q+3.
  __m512 a[4], b[4];
  for (size_t k = 0; k < 4; ++k) {
    a[k] = _mm512_unpacklo_ps(rows[2 * k], rows[2 * k + 1]);
    b[k] = _mm512_unpackhi_ps(rows[2 * k], rows[2 * k + 1]);
  }
  // c[i]: lane q = rows 0..3 of token 4q + i; d[i]: rows 4..7.
  const __m512 c[4] = {_mm512_shuffle_ps(a[0], a[1], 0x44), _mm512_shuffle_ps(a[0], a[1], 0xEE),
                       _mm512_shuffle_ps(b[0], b[1], 0x44), _mm512_shuffle_ps(b[0], b[1], 0xEE)};
  const __m512 d[4] = {_mm512_shuffle_ps(a[2], a[3], 0x44), _mm512_shuffle_ps(a[2], a[3], 0xEE),
                       _mm512_shuffle_ps(b[2], b[3], 0x44), _mm512_shuffle_ps(b[2], b[3], 0xEE)};
  // Lanes q of c[i] and d[i] side by side: tokens i and 4 + i, then 8 + i and 12 + i.
  const __m512i first = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i second =
      _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  for (size_t i = 0; i < 4; ++i) {
    const __m512 lo = _mm512_permutex2var_ps(c[i], first, d[i]);
    const __m512 hi = _mm512_permutex2var_ps(c[i], second, d[i]);
    const __m256 token[4] = {_mm512_castps512_ps256(lo), _mm512_extractf32x8_ps(lo, 1),
                             _mm512_castps512_ps256(hi), _mm512_extractf32x8_ps(hi, 1)};
    for (size_t k = 0; k < 4; ++k)
      if (4 * k + i < tokens) _mm256_mask_storeu_ps(dst(4 * k + i), row_mask, token[k]);
  }
}

// Rows [r0, r0 + rows) (rows <= kLaneRows; missing rows repeat the last one and are not stored)
// against kTiles token tiles from t0 (`tokens` of them real), groups [g0, g1) of the chains
// (resumed from y when g0 > 0).
// kRowDwords (VNNI, 2-bit or 4-bit): the weights come from m's row-dword tiles, and the tile is a
// whole 16-row tile of them (r0 a multiple of 16, rows == 8: each half's count) run as two halves
// of kLaneRows rows: each group's 16 rows are looked up at once (the gemvs' crumbs or nibbles)
// into a buffer [quad i][tile row] of weight dwords, which both halves read.
template <uint32_t kBits, size_t kTiles, bool kRowDwords = false>
void LaneTile(const Unpacker<kBits>& unpack, const GemmArgs& a, const LaneActs& la, size_t t0,
              size_t tokens, size_t g0, size_t g1, size_t r0, size_t rows) {
  constexpr size_t R = kLaneRows;
  static_assert(!kRowDwords || ((kBits == 2 || kBits == 4) && kVnni));
  constexpr size_t kBlockBytes = kBits == 4 ? kCqRowDword4BlockBytes : kCqRowDwordBlockBytes;
  constexpr size_t kBlockCodeBytes = kBits * kI8Group / 8 * kCqTileRows;  // then the f16 norms
  const CqMatrix& m = *a.m;
  const uint8_t* codes[R];
  const uint8_t* norms[R];
  const uint8_t* tile = nullptr;
  constexpr size_t kHalves = kRowDwords ? 2 : 1;
  if constexpr (kRowDwords) {
    tile = m.tiles + r0 / kCqTileRows * m.groups_per_row * kBlockBytes;
  } else {
    for (size_t r = 0; r < R; ++r) {
      const size_t row = r0 + std::min(r, rows - 1);
      codes[r] = m.codes + row * m.row_bytes;
      norms[r] = m.norms + row * m.groups_per_row * 2;
    }
  }
  // The chains, row-major; a token's R rows are gathered into one vector for y (stores of single
  // floats at y's row stride were most of the time: that stride maps every token to few L1 sets).
  alignas(64) float out[kHalves * R][kTiles][kLanes];
  auto y_at = [&](size_t l, size_t half) {
    return a.y + (t0 + l) * a.ldy + (r0 + half * R - a.row_begin);
  };
  const __m256i gather =
      _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                         _mm256_set1_epi32(static_cast<int32_t>(kTiles * kLanes)));
  const __mmask8 row_mask = static_cast<__mmask8>((1u << rows) - 1u);
  static_assert(R == 8, "one 8-float vector per token");
  if (g0 > 0) {
    for (size_t half = 0; half < kHalves; ++half)
      for (size_t l = 0; l < tokens; ++l)
        _mm256_i32scatter_ps(&out[half * R][0][0] + l, gather,
                             _mm256_maskz_loadu_ps(row_mask, y_at(l, half)), 4);
  } else {
    for (auto& row : out)
      for (auto& v : row) _mm512_store_ps(v, _mm512_setzero_ps());
  }
  const __m512 cb = _mm512_set1_ps(a.cb_scale);
  // Group g's weights are unpacked one group ahead (double buffer): the dword broadcasts then
  // read stores made a whole group earlier, not ones still in flight.
  // Codes: [row][128 weights in layout order]; kRowDwords: [quad][16 tile rows] weight dwords.
  constexpr size_t kBufBytes = kRowDwords ? kLaneQuads * kCqTileRows * 4 : R * kI8Group;
  alignas(64) uint8_t wbuf[2][kBufBytes];
  auto unpack_group = [&](size_t g, uint8_t* dst) {
    if constexpr (kRowDwords && kBits == 2) {
      const uint8_t* block = tile + g * kBlockBytes;
      for (size_t d = 0; d < 8; ++d) {
        __m512i w[4];
        unpack.Crumbs(_mm512_loadu_si512(block + 64 * d), w[0], w[1], w[2], w[3]);
        for (size_t c = 0; c < 4; ++c) _mm512_store_si512(dst + 64 * (d + 8 * c), w[c]);
      }
    } else if constexpr (kRowDwords) {  // 4-bit: vector d's nibbles are quads d and 16 + d
      const uint8_t* block = tile + g * kBlockBytes;
      for (size_t d = 0; d < 16; ++d) {
        __m512i lo, hi;
        unpack.Nibbles(_mm512_loadu_si512(block + 64 * d), lo, hi);
        _mm512_store_si512(dst + 64 * d, lo);
        _mm512_store_si512(dst + 64 * (16 + d), hi);
      }
    } else {
      for (size_t r = 0; r < R; ++r) {
        GroupWeights gw;
        unpack.Group(codes[r] + g * 16 * kBits, &gw);
        _mm512_store_si512(dst + r * kI8Group, gw.w[0]);
        _mm512_store_si512(dst + r * kI8Group + 64, gw.w[1]);
      }
    }
  };
  unpack_group(g0, wbuf[0]);
  for (size_t g = g0; g < g1; ++g) {
    const uint8_t* w = wbuf[(g - g0) % 2];
    if (g + 1 < g1) unpack_group(g + 1, wbuf[(g + 1 - g0) % 2]);
    for (size_t half = 0; half < kHalves; ++half) {
      const size_t tile_row = half * R;
      alignas(64) float norm[R];
      for (size_t r = 0; r < R; ++r) {
        if constexpr (kRowDwords) {
          uint16_t bits;
          std::memcpy(&bits, tile + g * kBlockBytes + kBlockCodeBytes + 2 * (tile_row + r), 2);
          norm[r] = _cvtsh_ss(bits);
        } else {
          uint16_t bits;
          std::memcpy(&bits, norms[r] + 2 * g, 2);
          norm[r] = _cvtsh_ss(bits);
        }
      }
      if constexpr (kRowDwords)
        LaneGroup<kTiles, 4, 64>(w + 4 * tile_row, la, g - g0, norm, cb, out + tile_row);
      else
        LaneGroup<kTiles, kI8Group, 4>(w, la, g - g0, norm, cb, out);
    }
  }
  for (size_t half = 0; half < kHalves; ++half)
    for (size_t h = 0; h < kTiles && h * kLanes < tokens; ++h) {
      __m512 rows[R];
      for (size_t r = 0; r < R; ++r) rows[r] = _mm512_load_ps(out[half * R + r][h]);
      StoreTokenRows(rows, std::min(kLanes, tokens - h * kLanes), row_mask,
                     [&](size_t j) { return y_at(h * kLanes + j, half); });
    }
}

template <uint32_t kBits>
void GemmLanes(const Unpacker<kBits>& unpack, const GemmArgs& a, size_t row_end) {
  const I8Acts& acts = *a.acts;
  const size_t groups = a.m->groups_per_row;
  LaneActs la;
  for (size_t t0 = 0; t0 < acts.n; t0 += 2 * kLanes) {
    const size_t tokens = std::min(acts.n - t0, 2 * kLanes);
    for (size_t g0 = 0; g0 < groups; g0 += kLaneGroupBlock) {
      const size_t g1 = std::min(groups, g0 + kLaneGroupBlock);
      StageLanes(acts, groups, t0, tokens, g0, g1, &la);
#if defined(__AVX512VNNI__)
      if constexpr (kBits == 2 || kBits == 4) {
        if (RowDwordTiles(*a.m, a.row_begin, row_end, kBits)) {  // whole 16-row tiles
          for (size_t r0 = a.row_begin; r0 < row_end; r0 += kCqTileRows) {
            if (tokens > kLanes)
              LaneTile<kBits, 2, true>(unpack, a, la, t0, tokens, g0, g1, r0, kLaneRows);
            else
              LaneTile<kBits, 1, true>(unpack, a, la, t0, tokens, g0, g1, r0, kLaneRows);
          }
          continue;
        }
      }
#endif
      for (size_t r0 = a.row_begin; r0 < row_end; r0 += kLaneRows) {
        const size_t rows = std::min(kLaneRows, row_end - r0);
        if (tokens > kLanes)
          LaneTile<kBits, 2>(unpack, a, la, t0, tokens, g0, g1, r0, rows);
        else
          LaneTile<kBits, 1>(unpack, a, la, t0, tokens, g0, g1, r0, rows);
      }
    }
  }
}
#endif

template <uint32_t kBits>
void GemmBits(const CqMatrix& m, const I8Codebook& cb, const I8Acts& acts, size_t row_begin,
              size_t row_end, float* y, size_t ldy);

#if defined(__AVX512VNNI__)
// Tokens below which a 16-lane tile costs more than that many one-token gemvs: a tile's cost
// hardly depends on how many of its lanes are used (measured with the hidden [.i8bench] case on
// the 27-layer 2-bit shape: one tile ~11 gemvs).
constexpr size_t kLaneTileMinTokens = 10;

// How many of n tokens (a prefix) the lane tiles take: whole tiles of 16, plus the last partial
// tile when it has at least kLaneTileMinTokens tokens; the rest go one token at a time.
constexpr size_t LaneTokens(size_t n) {
  const size_t whole = n / kLanes * kLanes, rest = n - whole;
  return rest >= kLaneTileMinTokens ? n : whole;
}

// VNNI: lane tiles for most tokens, the gemv for the others (the same bits either way).
template <uint32_t kBits>
void GemmVnni(const Unpacker<kBits>& unpack, const CqMatrix& m, const I8Codebook& cb,
              const I8Acts& acts, size_t row_begin, size_t row_end, float* y, size_t ldy) {
  const size_t lanes = LaneTokens(acts.n);
  if (lanes > 0) {
    const I8Acts head{acts.q, acts.scales, lanes, acts.in_pad};
    GemmLanes<kBits>(unpack, GemmArgs{&m, &head, cb.scale, row_begin, y, ldy}, row_end);
  }
  const size_t groups = m.groups_per_row;
  for (size_t t = lanes; t < acts.n; ++t) {
    const I8Acts one{acts.q + t * acts.in_pad, acts.scales + t * groups, 1, acts.in_pad};
    GemmBits<kBits>(m, cb, one, row_begin, row_end, y + t * ldy, ldy);
  }
}
#endif

template <uint32_t kBits>
void GemmBits(const CqMatrix& m, const I8Codebook& cb, const I8Acts& acts, size_t row_begin,
              size_t row_end, float* y, size_t ldy) {
  const Unpacker<kBits> unpack(cb);
#if defined(__AVX512VNNI__)
  if (acts.n > 1) return GemmVnni<kBits>(unpack, m, cb, acts, row_begin, row_end, y, ldy);
#endif
#if defined(__AVX512VNNI__)
  if constexpr (kBits == 2 || kBits == 4) {
    if (acts.n == 1 && RowDwordTiles(m, row_begin, row_end, kBits))
      return GemvRowDwords(unpack, GemmArgs{&m, &acts, cb.scale, row_begin, y, ldy}, row_end);
  }
#endif
  if constexpr (kBits != 3) {
    if (acts.n == 1) {  // whole tiles of 16 rows by pairs of groups, the rest below
      const size_t full = row_begin + (row_end - row_begin) / kLanes * kLanes;
      if (full > row_begin)
        GemvPairs<kBits>(unpack, GemmArgs{&m, &acts, cb.scale, row_begin, y, ldy}, full);
      y += full - row_begin;
      row_begin = full;
      if (row_begin >= row_end) return;  // no rows left for the tiles below (nor their staging)
    }
  }
  const GemmArgs a{&m, &acts, cb.scale, row_begin, y, ldy};
  const size_t groups = m.groups_per_row;
  TokenBlock tb;
  for (size_t t0 = 0; t0 < acts.n;) {
    const size_t left = acts.n - t0;
    const size_t tokens = left >= 16 ? 16 : left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
    for (size_t g0 = 0; g0 < groups; g0 += kGroupBlock) {
      const size_t g1 = std::min(groups, g0 + kGroupBlock);
      StageTokens(acts, groups, t0, tokens, g0, g1, &tb);
      switch (tokens) {
        case 16:
          Rows<kBits, 16>(unpack, a, tb, t0, g0, g1, row_begin, row_end);
          break;
        case 8:
          Rows<kBits, 8>(unpack, a, tb, t0, g0, g1, row_begin, row_end);
          break;
        case 4:
          Rows<kBits, 4>(unpack, a, tb, t0, g0, g1, row_begin, row_end);
          break;
        case 2:
          Rows<kBits, 2>(unpack, a, tb, t0, g0, g1, row_begin, row_end);
          break;
        default:
          Rows<kBits, 1>(unpack, a, tb, t0, g0, g1, row_begin, row_end);
          break;
      }
    }
    t0 += tokens;
  }
}

void GemmI8(const CqMatrix& m, const I8Codebook& cb, const I8Acts& acts, size_t row_begin,
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

// Exact for any int8 values (including -128): both sides widened to int16, pairs summed by
// vpmaddwd (or vpdpwssd) into int32.
// With VNNI, 64 bytes per step: a + 128 (a byte XOR 0x80) is unsigned, so vpdpbusd gives
// sum((a + 128) * b) exactly, and a second vpdpbusd with ones gives sum(b) to subtract 128 times.
[[maybe_unused]] int32_t DotI8(const int8_t* a, const int8_t* b, size_t n) {
  __m512i acc = _mm512_setzero_si512();
  size_t i = 0;
#if defined(__AVX512VNNI__)
  {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80)), ones = _mm512_set1_epi8(1);
    // Two accumulators of each kind: four independent vpdpbusd chains hide its latency.
    __m512i acc2 = _mm512_setzero_si512(), bsum = _mm512_setzero_si512(),
            bsum2 = _mm512_setzero_si512();
    for (; i + 128 <= n; i += 128) {
      const __m512i x = _mm512_xor_si512(_mm512_loadu_si512(a + i), flip);
      const __m512i z = _mm512_loadu_si512(b + i);
      const __m512i x2 = _mm512_xor_si512(_mm512_loadu_si512(a + i + 64), flip);
      const __m512i z2 = _mm512_loadu_si512(b + i + 64);
      acc = _mm512_dpbusd_epi32(acc, x, z);
      bsum = _mm512_dpbusd_epi32(bsum, ones, z);
      acc2 = _mm512_dpbusd_epi32(acc2, x2, z2);
      bsum2 = _mm512_dpbusd_epi32(bsum2, ones, z2);
    }
    for (; i + 64 <= n; i += 64) {
      const __m512i x = _mm512_xor_si512(_mm512_loadu_si512(a + i), flip);
      const __m512i z = _mm512_loadu_si512(b + i);
      acc = _mm512_dpbusd_epi32(acc, x, z);
      bsum = _mm512_dpbusd_epi32(bsum, ones, z);
    }
    acc = _mm512_sub_epi32(_mm512_add_epi32(acc, acc2),
                           _mm512_slli_epi32(_mm512_add_epi32(bsum, bsum2), 7));
  }
#endif
  for (; i + 32 <= n; i += 32) {
    const __m512i x =
        _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i)));
    const __m512i z =
        _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i)));
#if defined(__AVX512VNNI__)
    acc = _mm512_dpwssd_epi32(acc, x, z);
#else
    acc = _mm512_add_epi32(acc, _mm512_madd_epi16(x, z));
#endif
  }
  int32_t s = _mm512_reduce_add_epi32(acc);
  for (; i < n; ++i) s += int32_t{a[i]} * int32_t{b[i]};
  return s;
}

#if defined(__AVX512VNNI__)
// Rows against kT vectors (DotI8RowsFn), up to kR rows at a time: each 64 bytes of a row are
// flipped to unsigned once (a + 128) and meet the same 64 bytes of every vector in its own
// vpdpbusd chain (kR * kT chains: 8 keep the unit busy at vpdpbusd's 4-cycle latency, so a single
// vector takes 8 rows at a time); 128 * (sum of the vector) is subtracted once per vector, not per
// row. Exact: |dot| + 128 * |sum| < 2^31 for n < 2^16.
template <size_t kT, size_t kR>
void DotI8RowsBlock(const int8_t* a, size_t lda, const int8_t* x, size_t ldx, size_t n64,
                    const int32_t* bias, int32_t* out, size_t ldo) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512i acc[kR][kT];
  for (auto& row : acc)
    for (__m512i& v : row) v = _mm512_setzero_si512();
  for (size_t i = 0; i < n64; i += 64) {
    __m512i u[kR];
    for (size_t r = 0; r < kR; ++r)
      u[r] = _mm512_xor_si512(_mm512_loadu_si512(a + r * lda + i), flip);
    for (size_t t = 0; t < kT; ++t) {
      const __m512i xv = _mm512_loadu_si512(x + t * ldx + i);
      for (size_t r = 0; r < kR; ++r) acc[r][t] = _mm512_dpbusd_epi32(acc[r][t], u[r], xv);
    }
  }
  for (size_t t = 0; t < kT; ++t)
    for (size_t r = 0; r < kR; ++r) out[t * ldo + r] = _mm512_reduce_add_epi32(acc[r][t]) - bias[t];
}

template <size_t kT>
void DotI8RowsTile(const int8_t* a, size_t lda, size_t rows, const int8_t* x, size_t ldx, size_t n,
                   int32_t* out, size_t ldo) {
  const size_t n64 = n / 64 * 64;
  const __m512i ones = _mm512_set1_epi8(1);
  int32_t bias[kT];
  for (size_t t = 0; t < kT; ++t) {  // four chains: this runs before every row block
    __m512i s[4];
    for (__m512i& v : s) v = _mm512_setzero_si512();
    for (size_t i = 0; i < n64; i += 64)
      s[i / 64 % 4] = _mm512_dpbusd_epi32(s[i / 64 % 4], ones, _mm512_loadu_si512(x + t * ldx + i));
    bias[t] = _mm512_reduce_add_epi32(
                  _mm512_add_epi32(_mm512_add_epi32(s[0], s[1]), _mm512_add_epi32(s[2], s[3]))) *
              128;
  }
  constexpr size_t kWide = kT == 1 ? 8 : kT == 2 ? 4 : 2;  // rows per block: >= 8 chains
  size_t r = 0;
  for (; r + kWide <= rows; r += kWide)
    DotI8RowsBlock<kT, kWide>(a + r * lda, lda, x, ldx, n64, bias, out + r, ldo);
  if constexpr (kWide > 4) {
    if (r + 4 <= rows) {
      DotI8RowsBlock<kT, 4>(a + r * lda, lda, x, ldx, n64, bias, out + r, ldo);
      r += 4;
    }
  }
  if constexpr (kWide > 2) {
    if (r + 2 <= rows) {
      DotI8RowsBlock<kT, 2>(a + r * lda, lda, x, ldx, n64, bias, out + r, ldo);
      r += 2;
    }
  }
  if (r < rows) DotI8RowsBlock<kT, 1>(a + r * lda, lda, x, ldx, n64, bias, out + r, ldo);
  if (n64 < n) {  // the tail of every row, in place of the integer sums above (exact either way)
    for (size_t t = 0; t < kT; ++t)
      for (size_t row = 0; row < rows; ++row)
        for (size_t i = n64; i < n; ++i)
          out[t * ldo + row] += int32_t{a[row * lda + i]} * int32_t{x[t * ldx + i]};
  }
}

[[maybe_unused]] void DotI8Rows(const int8_t* a, size_t lda, size_t rows, const int8_t* x,
                                size_t ldx, size_t nx, size_t n, int32_t* out, size_t ldo) {
  constexpr size_t kMaxT = 4;
  size_t t = 0;
  for (; t + kMaxT <= nx; t += kMaxT)
    DotI8RowsTile<kMaxT>(a, lda, rows, x + t * ldx, ldx, n, out + t * ldo, ldo);
  const int8_t* xt = x + t * ldx;
  int32_t* ot = out + t * ldo;
  switch (nx - t) {
    case 3:
      DotI8RowsTile<3>(a, lda, rows, xt, ldx, n, ot, ldo);
      break;
    case 2:
      DotI8RowsTile<2>(a, lda, rows, xt, ldx, n, ot, ldo);
      break;
    case 1:
      DotI8RowsTile<1>(a, lda, rows, xt, ldx, n, ot, ldo);
      break;
    default:
      break;
  }
}
#endif

}  // namespace
}  // namespace needle::kernels
