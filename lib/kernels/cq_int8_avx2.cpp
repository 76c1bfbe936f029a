// AVX2 (+FMA, F16C) integer CQ kernels (cq_int8.h): activation quantizer, gemm and int8 dot.
// Bit-exact with the scalar reference (cq_int8.cpp): the quantizer performs the reference's float
// operations on every element, 8 at a time; the gemm's group dots are exact int32 and its f32
// chains run over the groups in order. Built with -ffp-contract=off. Only called after the
// dispatcher's CPU check.
//
// Gemm tiles: 8 f32 lanes, lane l = r * T + t for R rows x T tokens (R * T <= 8). Per 128-group the
// R rows' codes are unpacked once (shifts, masks, vpshufb table lookups) into |w| and w in the
// activation layout of cq_int8_x86.h and reused for the T tokens: vpsignb moves the sign of w onto
// the activation, vpmaddubsw multiplies (pair sums <= 2 * 127 * 127: no saturation), vpmaddwd
// widens to int32. The R*T group dots are reduced into one vector, then per lane
//   acc = norm_g * (cb_scale * (s_g * (float)I_g)) + acc
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cq_int8.h"
#include "kernels/cq_int8_x86.h"
#include "kernels/lane_algorithms.h"
#include "kernels/x86_lanes.h"  // first: includes <immintrin.h> (see there)

namespace needle::kernels {

namespace {

constexpr size_t kLanes = 8;
// Groups whose token scales and row norms are staged at a time; longer rows are walked in blocks,
// the chains resumed from y (an f32 store and reload is exact).
constexpr size_t kGroupBlock = 64;

// ---- quantizer ----

// 32 int32 (four vectors, in range) -> 32 int8 in column order.
inline __m256i Bytes32(const __m256i* v) {
  const __m256i packed =
      _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
  return _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// 128 int8 codes in column order (four 32-byte vectors) -> the layout of I8LayoutPositionX86.
inline void StoreLayout(uint32_t code_bits, __m256i* y, int8_t* dst) {
  __m256i out[4];
  if (code_bits == 2) {
    // 4x4 byte transpose per 128-bit lane (dword j of a lane = crumb-j columns), then an 8x4
    // dword transpose across the four vectors.
    const __m256i transpose = _mm256_broadcastsi128_si256(
        _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    for (size_t i = 0; i < 4; ++i) y[i] = _mm256_shuffle_epi8(y[i], transpose);
    const __m256i t0 = _mm256_unpacklo_epi32(y[0], y[1]), t1 = _mm256_unpackhi_epi32(y[0], y[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(y[2], y[3]), t3 = _mm256_unpackhi_epi32(y[2], y[3]);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    out[0] = _mm256_permutevar8x32_epi32(_mm256_unpacklo_epi64(t0, t2), order);
    out[1] = _mm256_permutevar8x32_epi32(_mm256_unpackhi_epi64(t0, t2), order);
    out[2] = _mm256_permutevar8x32_epi32(_mm256_unpacklo_epi64(t1, t3), order);
    out[3] = _mm256_permutevar8x32_epi32(_mm256_unpackhi_epi64(t1, t3), order);
  } else if (code_bits == 3) {
    const __m256i split = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);  // even | odd dwords
    __m256i e[4];
    for (size_t i = 0; i < 4; ++i) e[i] = _mm256_permutevar8x32_epi32(y[i], split);
    out[0] = _mm256_permute2x128_si256(e[0], e[1], 0x20);
    out[1] = _mm256_permute2x128_si256(e[2], e[3], 0x20);
    out[2] = _mm256_permute2x128_si256(e[0], e[1], 0x31);
    out[3] = _mm256_permute2x128_si256(e[2], e[3], 0x31);
  } else {
    const __m256i split = _mm256_broadcastsi128_si256(
        _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
    __m256i e[4];  // [even bytes | odd bytes] of each vector
    for (size_t i = 0; i < 4; ++i)
      e[i] = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(y[i], split), 0xD8);
    out[0] = _mm256_permute2x128_si256(e[0], e[1], 0x20);
    out[1] = _mm256_permute2x128_si256(e[2], e[3], 0x20);
    out[2] = _mm256_permute2x128_si256(e[0], e[1], 0x31);
    out[3] = _mm256_permute2x128_si256(e[2], e[3], 0x31);
  }
  for (size_t i = 0; i < 4; ++i)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 32 * i), out[i]);
}

// ---- gemm ----

// One 128-group of one row as int8 weights in layout order, 32 bytes per vector.
struct GroupWeights {
  __m256i magnitude[4];  // |w|
  __m256i sign[4];       // w (its sign goes onto the activations)
};

template <uint32_t kBits>
class Unpacker {
 public:
  explicit Unpacker(const I8Codebook& cb) {
    alignas(16) uint8_t magnitude[16], sign[16];
    for (size_t k = 0; k < 16; ++k) {
      const auto bits = static_cast<uint8_t>(cb.q[k]);  // two's complement; never -128
      magnitude[k] = (bits & 0x80) ? static_cast<uint8_t>(0u - bits) : bits;
      sign[k] = bits;
    }
    magnitude_ =
        _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(magnitude)));
    sign_ = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(sign)));
  }

  // `codes`: the group's 16 * kBits code bytes.
  void Group(const uint8_t* codes, GroupWeights* out) const {
    __m256i idx[4];
    if constexpr (kBits == 2) {
      const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes));
      const __m256i mask = _mm256_set1_epi8(3);
      idx[0] = _mm256_and_si256(c, mask);
      idx[1] = _mm256_and_si256(_mm256_srli_epi16(c, 2), mask);
      idx[2] = _mm256_and_si256(_mm256_srli_epi16(c, 4), mask);
      idx[3] = _mm256_and_si256(_mm256_srli_epi16(c, 6), mask);
    } else if constexpr (kBits == 4) {
      const __m256i c0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes));
      const __m256i c1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 32));
      const __m256i mask = _mm256_set1_epi8(15);
      idx[0] = _mm256_and_si256(c0, mask);
      idx[1] = _mm256_and_si256(c1, mask);
      idx[2] = _mm256_and_si256(_mm256_srli_epi16(c0, 4), mask);
      idx[3] = _mm256_and_si256(_mm256_srli_epi16(c1, 4), mask);
    } else {
      // Each half of the group (24 bytes = 8 chunks of 3 bytes) -> chunk m in dword m (lane 0 from
      // bytes 0..11, lane 1 from bytes 12..23, loaded at offset 8 so nothing past the half is
      // read), then codes 0..3 / 4..7 of every chunk spread to one byte each.
      const __m256i bytes =
          _mm256_setr_epi8(0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1, 4, 5, 6, -1, 7, 8,
                           9, -1, 10, 11, 12, -1, 13, 14, 15, -1);
      for (size_t h = 0; h < 2; ++h) {
        const uint8_t* p = codes + 24 * h;
        const __m256i x =
            _mm256_shuffle_epi8(_mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(p + 8),
                                                    reinterpret_cast<const __m128i*>(p)),
                                bytes);
        idx[h] = Spread3(x);
        idx[2 + h] = Spread3(_mm256_srli_epi32(x, 12));
      }
    }
    for (size_t i = 0; i < 4; ++i) {
      out->magnitude[i] = _mm256_shuffle_epi8(magnitude_, idx[i]);
      out->sign[i] = _mm256_shuffle_epi8(sign_, idx[i]);
    }
  }

 private:
  // Four 3-bit fields at bits 0, 3, 6, 9 of every dword -> bytes 0..3 of that dword.
  static __m256i Spread3(__m256i v) {
    __m256i r = _mm256_and_si256(v, _mm256_set1_epi32(0x7));
    r = _mm256_or_si256(r, _mm256_and_si256(_mm256_slli_epi32(v, 5), _mm256_set1_epi32(0x700)));
    r = _mm256_or_si256(r, _mm256_and_si256(_mm256_slli_epi32(v, 10), _mm256_set1_epi32(0x70000)));
    return _mm256_or_si256(
        r, _mm256_and_si256(_mm256_slli_epi32(v, 15), _mm256_set1_epi32(0x7000000)));
  }

  __m256i magnitude_, sign_;
};

// acc += int32 partial dots of one group's weights with its 128 activations a.
__attribute__((always_inline)) inline __m256i DotGroup(__m256i acc, const GroupWeights& w,
                                                       const int8_t* a) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i sum[4];
  for (size_t i = 0; i < 4; ++i) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + 32 * i));
    sum[i] = _mm256_madd_epi16(_mm256_maddubs_epi16(w.magnitude[i], _mm256_sign_epi8(x, w.sign[i])),
                               ones);
  }
  return _mm256_add_epi32(
      acc, _mm256_add_epi32(_mm256_add_epi32(sum[0], sum[1]), _mm256_add_epi32(sum[2], sum[3])));
}

// Lane l of the result = the sum of the eight int32 lanes of lane(l), l = 0..7. The reduction's
// stages run as soon as their inputs exist, so only a few partial sums are live next to the
// caller's unpacked weights (no spills).
template <class LaneFn>
__attribute__((always_inline)) inline __m256i ReduceLanes8(const LaneFn& lane) {
  auto pair = [&](size_t l) __attribute__((always_inline)) {
    const __m256i d0 = lane(l), d1 = lane(l + 1);
    return _mm256_add_epi32(_mm256_unpacklo_epi32(d0, d1), _mm256_unpackhi_epi32(d0, d1));
  };
  auto quad = [&](size_t l) __attribute__((always_inline)) {
    const __m256i b0 = pair(l), b1 = pair(l + 2);
    return _mm256_add_epi32(_mm256_unpacklo_epi64(b0, b1), _mm256_unpackhi_epi64(b0, b1));
  };
  const __m256i c0 = quad(0), c1 = quad(4);
  return _mm256_add_epi32(_mm256_permute2x128_si256(c0, c1, 0x20),
                          _mm256_permute2x128_si256(c0, c1, 0x31));
}

// Token scales of one (token tile, group block), transposed: [group - g0][t] (zero for t >= T).
struct TokenBlock {
  alignas(32) float scale[kGroupBlock][kLanes];
};

void StageTokens(const I8Acts& acts, size_t groups, size_t t0, size_t tokens, size_t g0, size_t g1,
                 TokenBlock* tb) {
  for (size_t g = g0; g < g1; ++g)
    for (size_t t = 0; t < kLanes; ++t)
      tb->scale[g - g0][t] = t < tokens ? acts.scales[(t0 + t) * groups + g] : 0.f;
}

// R f16 values -> lanes 0..R-1 (the others unspecified).
template <size_t R>
inline __m256 LoadHalves(const uint16_t* p) {
  if constexpr (R == 8) {
    return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p)));
  } else {
    uint64_t bits = 0;
    std::memcpy(&bits, p, R * 2);
    return _mm256_castps128_ps256(_mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<int64_t>(bits))));
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
  alignas(32) uint16_t norms[kGroupBlock][R];
  for (size_t r = 0; r < R; ++r) {
    const size_t row = r0 + std::min(r, rows - 1);
    codes[r] = m.codes + row * m.row_bytes;
    const uint8_t* row_norms = m.norms + row * m.groups_per_row * 2;
    for (size_t g = g0; g < g1; ++g) std::memcpy(&norms[g - g0][r], row_norms + 2 * g, 2);
  }
  alignas(32) int32_t lane_token[kLanes], lane_row[kLanes];
  for (size_t l = 0; l < kLanes; ++l) {
    lane_token[l] = static_cast<int32_t>(l % T);
    lane_row[l] = static_cast<int32_t>(std::min(l / T, R - 1));
  }
  const __m256i idx_t = _mm256_load_si256(reinterpret_cast<const __m256i*>(lane_token));
  const __m256i idx_r = _mm256_load_si256(reinterpret_cast<const __m256i*>(lane_row));
  const __m256 cb = _mm256_set1_ps(a.cb_scale);
  alignas(32) float out[kLanes] = {};
  auto y_at = [&](size_t r, size_t t) { return a.y + (t0 + t) * a.ldy + (r0 + r - a.row_begin); };
  if (g0 > 0)
    for (size_t r = 0; r < rows; ++r)
      for (size_t t = 0; t < T; ++t) out[r * T + t] = *y_at(r, t);
  __m256 acc = _mm256_load_ps(out);
  const int8_t* q = a.acts->q + t0 * in_pad;
  for (size_t g = g0; g < g1; ++g) {
    const int8_t* qg = q + g * kI8Group;
    GroupWeights w[R];
#pragma GCC unroll 8
    for (size_t r = 0; r < R; ++r) unpack.Group(codes[r] + g * 16 * kBits, &w[r]);
    // Lane l = r * T + t.
    const __m256i sums = ReduceLanes8([&](size_t l) __attribute__((always_inline)) {
      return l < R * T ? DotGroup(_mm256_setzero_si256(), w[l / T], qg + (l % T) * in_pad)
                       : _mm256_setzero_si256();
    });
    const __m256 s = _mm256_permutevar8x32_ps(_mm256_load_ps(tb.scale[g - g0]), idx_t);
    const __m256 norm = _mm256_permutevar8x32_ps(LoadHalves<R>(norms[g - g0]), idx_r);
    const __m256 dot = _mm256_cvtepi32_ps(sums);
    acc = _mm256_add_ps(_mm256_mul_ps(norm, _mm256_mul_ps(cb, _mm256_mul_ps(s, dot))), acc);
  }
  _mm256_store_ps(out, acc);
  for (size_t r = 0; r < rows; ++r)
    for (size_t t = 0; t < T; ++t) *y_at(r, t) = out[r * T + t];
}

// All rows of the call for one token tile: full tiles of R = 8 / T rows, then the leftover rows
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

template <uint32_t kBits>
void GemvBits(const CqMatrix& m, const I8Codebook& cb, const I8Acts& acts, size_t row_begin,
              size_t row_end, float* y);

template <uint32_t kBits>
void GemmBits(const CqMatrix& m, const I8Codebook& cb, const I8Acts& acts, size_t row_begin,
              size_t row_end, float* y, size_t ldy) {
  const Unpacker<kBits> unpack(cb);
  const GemmArgs a{&m, &acts, cb.scale, row_begin, y, ldy};
  const size_t groups = m.groups_per_row;
  TokenBlock tb;
  for (size_t t0 = 0; t0 < acts.n;) {
    const size_t left = acts.n - t0;
    const size_t tokens = left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
    if constexpr (kBits != 3) {
      if (tokens == 1) {
        // A last single token: the one-token kernel (fewer instructions than a 1 x 8 tile; the
        // same exact dots and chains).
        const I8Acts one{acts.q + t0 * acts.in_pad, acts.scales + t0 * groups, 1, acts.in_pad};
        GemvBits<kBits>(m, cb, one, row_begin, row_end, y + t0 * ldy);
        break;
      }
    }
    for (size_t g0 = 0; g0 < groups; g0 += kGroupBlock) {
      const size_t g1 = std::min(groups, g0 + kGroupBlock);
      StageTokens(acts, groups, t0, tokens, g0, g1, &tb);
      switch (tokens) {
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

// ---- gemv (one token) ----
//
// With one token the activations are shared by every row, so the work per row and group is only
// what the weights need: the int8 weights w come from one byte-table lookup per 32 codes (the
// table holds the signed levels), vpsignb moves the activation's sign onto w, and vpmaddubsw
// multiplies |a| (computed once per call) by w * sign(a): the same products as the gemm's
// |w| * (a * sign(w)), one lookup fewer per 32 codes. 2-bit codes are looked up by nibble (two
// codes per nibble, one table per code position), so a group's 32 code bytes need one shift and
// two masks. Eight rows run side by side; their group dots are reduced into one vector whose
// lanes are the rows, and each lane's chain runs over the groups in order, as the reference.

template <uint32_t kBits>
class SignedLevels {
 public:
  explicit SignedLevels(const I8Codebook& cb) {
    alignas(16) int8_t lo[16], hi[16];
    for (size_t k = 0; k < 16; ++k) {
      if constexpr (kBits == 2) {
        lo[k] = cb.q[k & 3];   // the nibble's first code
        hi[k] = cb.q[k >> 2];  // its second code
      } else {
        lo[k] = hi[k] = cb.q[k];
      }
    }
    lo_ = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(lo)));
    hi_ = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(hi)));
  }

  // The group's 128 signed int8 weights in the activation layout (I8LayoutPositionX86).
  __attribute__((always_inline)) inline void Group(const uint8_t* codes, __m256i* w) const {
    const __m256i nibble = _mm256_set1_epi8(15);
    if constexpr (kBits == 2) {
      const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes));
      const __m256i low = _mm256_and_si256(c, nibble);
      const __m256i high = _mm256_and_si256(_mm256_srli_epi16(c, 4), nibble);
      w[0] = _mm256_shuffle_epi8(lo_, low);   // bits 0-1: column 4j
      w[1] = _mm256_shuffle_epi8(hi_, low);   // bits 2-3: column 4j + 1
      w[2] = _mm256_shuffle_epi8(lo_, high);  // bits 4-5: column 4j + 2
      w[3] = _mm256_shuffle_epi8(hi_, high);  // bits 6-7: column 4j + 3
    } else {
      const __m256i c0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes));
      const __m256i c1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 32));
      w[0] = _mm256_shuffle_epi8(lo_, _mm256_and_si256(c0, nibble));
      w[1] = _mm256_shuffle_epi8(lo_, _mm256_and_si256(c1, nibble));
      w[2] = _mm256_shuffle_epi8(lo_, _mm256_and_si256(_mm256_srli_epi16(c0, 4), nibble));
      w[3] = _mm256_shuffle_epi8(lo_, _mm256_and_si256(_mm256_srli_epi16(c1, 4), nibble));
    }
  }

 private:
  __m256i lo_, hi_;
};

// int32 partial dots of one row's group with the activations (signed a, magnitudes |a|).
template <uint32_t kBits>
__attribute__((always_inline)) inline __m256i GemvGroupDot(const SignedLevels<kBits>& levels,
                                                           const uint8_t* codes, const int8_t* a,
                                                           const int8_t* abs_a) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i w[4], sum[4];
  levels.Group(codes, w);
  for (size_t i = 0; i < 4; ++i) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + 32 * i));
    const __m256i m = _mm256_load_si256(reinterpret_cast<const __m256i*>(abs_a + 32 * i));
    sum[i] = _mm256_madd_epi16(_mm256_maddubs_epi16(m, _mm256_sign_epi8(w[i], x)), ones);
  }
  return _mm256_add_epi32(_mm256_add_epi32(sum[0], sum[1]), _mm256_add_epi32(sum[2], sum[3]));
}

// The f16 group norms of 8 whole rows ([row][group], G = 1, 2 or 4 groups per row, contiguous)
// as f32 columns: out[g][r] = norm of row r, group g. Byte shuffles put each group's 8 values
// together before one conversion per group (the previous way, storing the converted rows and
// gathering each column, stalled on the gathers reading the stores just made: the 2-bit GEMV
// took ~12% longer per row).
inline void TileNorms(const uint8_t* src, size_t G, float (*out)[kLanes]) {
  if (G == 1) {
    _mm256_store_ps(out[0],
                    _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src))));
    return;
  }
  const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
  if (G == 2) {
    // Per 128-bit lane (4 rows): [group 0 of the rows | group 1 of the rows], then the lanes'
    // group-0 halves together: [g0 r0-3, g0 r4-7, g1 r0-3, g1 r4-7].
    const __m256i split = _mm256_broadcastsi128_si256(
        _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15));
    const __m256i cols = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(x, split), 0xD8);
    _mm256_store_ps(out[0], _mm256_cvtph_ps(_mm256_castsi256_si128(cols)));
    _mm256_store_ps(out[1], _mm256_cvtph_ps(_mm256_extracti128_si256(cols, 1)));
    return;
  }
  // G == 4: x = rows 0-3, y = rows 4-7, each 128-bit lane two rows. Per lane, dword g = group g of
  // its two rows; the dwords of the four lanes (rows 01, 23, 45, 67) then go together per group.
  const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 32));
  const __m256i pairs = _mm256_broadcastsi128_si256(
      _mm_setr_epi8(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15));
  const __m256i px = _mm256_shuffle_epi8(x, pairs), py = _mm256_shuffle_epi8(y, pairs);
  // unpacklo: lane 0 [g0 r01, g0 r45, g1 r01, g1 r45], lane 1 [g0 r23, g0 r67, g1 r23, g1 r67].
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256i g01 = _mm256_permutevar8x32_epi32(_mm256_unpacklo_epi32(px, py), order);
  const __m256i g23 = _mm256_permutevar8x32_epi32(_mm256_unpackhi_epi32(px, py), order);
  _mm256_store_ps(out[0], _mm256_cvtph_ps(_mm256_castsi256_si128(g01)));
  _mm256_store_ps(out[1], _mm256_cvtph_ps(_mm256_extracti128_si256(g01, 1)));
  _mm256_store_ps(out[2], _mm256_cvtph_ps(_mm256_castsi256_si128(g23)));
  _mm256_store_ps(out[3], _mm256_cvtph_ps(_mm256_extracti128_si256(g23, 1)));
}

// Rows [r0, r0 + 8) (rows < 8: the last row repeats and is not stored), groups [g0, g1) of their
// chains (resumed from y when g0 > 0). `abs_a` holds |a| of groups [g0, g1).
constexpr size_t kPrefetchTiles = 2;

template <uint32_t kBits>
void GemvTile(const SignedLevels<kBits>& levels, const GemmArgs& a, const int8_t* abs_a, size_t g0,
              size_t g1, size_t r0, size_t rows) {
  const CqMatrix& m = *a.m;
  const size_t G = m.groups_per_row;
  const uint8_t* codes[kLanes];
  for (size_t r = 0; r < kLanes; ++r)
    codes[r] = m.codes + (r0 + std::min(r, rows - 1)) * m.row_bytes;
  // The group norms as f32, [group][row]. A full tile covering whole rows reads its 8 * G f16
  // norms as one contiguous run (rows are contiguous): with G <= 4 (every matrix of rows of up to
  // 512 columns) transposed in registers (TileNorms); otherwise converted 8 at a time and each
  // group's column gathered; a partial tile one value at a time.
  alignas(32) float norms[kGroupBlock][kLanes];
  if (rows == kLanes && g0 == 0 && g1 == G && G <= 4 && G != 3) {
    TileNorms(m.norms + r0 * G * 2, G, norms);
  } else if (rows == kLanes && g0 == 0 && g1 == G) {
    alignas(32) float flat[kGroupBlock * kLanes];  // [row][group]
    const uint8_t* src = m.norms + r0 * G * 2;
    for (size_t i = 0; i < kLanes * G; i += 8)
      _mm256_store_ps(
          flat + i,
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i))));
    const __m256i stride = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                              _mm256_set1_epi32(static_cast<int>(G)));
    for (size_t g = 0; g < G; ++g)
      _mm256_store_ps(norms[g], _mm256_i32gather_ps(flat + g, stride, 4));
  } else {
    for (size_t r = 0; r < kLanes; ++r) {
      const uint8_t* row_norms = m.norms + ((r0 + std::min(r, rows - 1)) * G + g0) * 2;
      for (size_t g = g0; g < g1; ++g) {
        uint16_t h;
        std::memcpy(&h, row_norms + 2 * (g - g0), 2);
        norms[g - g0][r] = _cvtsh_ss(h);
      }
    }
  }
  // The model's weights stream from L3 or memory: ask for a tile ahead's code bytes now (its 8
  // rows are contiguous), so they arrive while this tile computes.
  {
    const size_t ahead = r0 + kPrefetchTiles * kLanes;
    if (g0 == 0 && ahead < m.rows) {
      const uint8_t* p = m.codes + ahead * m.row_bytes;
      const size_t bytes = std::min(kLanes, m.rows - ahead) * m.row_bytes;
      for (size_t off = 0; off < bytes; off += 64)
        _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
    }
  }
  float* y = a.y + (r0 - a.row_begin);
  __m256 acc = _mm256_setzero_ps();
  if (g0 > 0) {
    alignas(32) float prev[kLanes] = {};
    std::memcpy(prev, y, rows * sizeof(float));
    acc = _mm256_load_ps(prev);
  }
  const __m256 cb = _mm256_set1_ps(a.cb_scale);
  const int8_t* q = a.acts->q;
  const float* scales = a.acts->scales;
  for (size_t g = g0; g < g1; ++g) {
    const int8_t* qg = q + g * kI8Group;
    const int8_t* ag = abs_a + (g - g0) * kI8Group;
    const size_t offset = g * 16 * kBits;
    const __m256i sums = ReduceLanes8([&](size_t r) __attribute__((always_inline)) {
      return GemvGroupDot<kBits>(levels, codes[r] + offset, qg, ag);
    });
    const __m256 s = _mm256_set1_ps(scales[g]);
    const __m256 dot = _mm256_cvtepi32_ps(sums);
    acc = _mm256_add_ps(
        _mm256_mul_ps(_mm256_load_ps(norms[g - g0]), _mm256_mul_ps(cb, _mm256_mul_ps(s, dot))),
        acc);
  }
  if (rows == kLanes) {
    _mm256_storeu_ps(y, acc);
  } else {
    alignas(32) float out[kLanes];
    _mm256_store_ps(out, acc);
    std::memcpy(y, out, rows * sizeof(float));
  }
}

template <uint32_t kBits>
void GemvBits(const CqMatrix& m, const I8Codebook& cb, const I8Acts& acts, size_t row_begin,
              size_t row_end, float* y) {
  const SignedLevels<kBits> levels(cb);
  const GemmArgs a{&m, &acts, cb.scale, row_begin, y, 1};
  const size_t groups = m.groups_per_row;
  alignas(32) int8_t abs_a[kGroupBlock * kI8Group];
  for (size_t g0 = 0; g0 < groups; g0 += kGroupBlock) {
    const size_t g1 = std::min(groups, g0 + kGroupBlock);
    for (size_t i = 0; i < (g1 - g0) * kI8Group; i += 32) {
      const __m256i x =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acts.q + g0 * kI8Group + i));
      _mm256_store_si256(reinterpret_cast<__m256i*>(abs_a + i), _mm256_abs_epi8(x));
    }
    for (size_t r0 = row_begin; r0 < row_end; r0 += kLanes)
      GemvTile<kBits>(levels, a, abs_a, g0, g1, r0, std::min(kLanes, row_end - r0));
  }
}

}  // namespace

void CqQuantizeI8Avx2(const float* x, size_t n, size_t cols, size_t ldx, size_t in_pad,
                      uint32_t code_bits, int8_t* q, float* scales) {
  QuantizeGroupsLanes<F32x8>(x, n, cols, ldx, in_pad, q, scales,
                             [code_bits](const __m256* v, float inv, int8_t* dst) {
                               const __m256 inv8 = _mm256_set1_ps(inv);
                               __m256i codes[16];
                               for (size_t i = 0; i < 16; ++i)
                                 codes[i] = F32x8::RoundToI8(_mm256_mul_ps(v[i], inv8));
                               __m256i bytes[4];
                               for (size_t i = 0; i < 4; ++i) bytes[i] = Bytes32(codes + 4 * i);
                               StoreLayout(code_bits, bytes, dst);
                             });
}

void CqGemmI8Avx2(const CqMatrix& m, const I8Codebook& cb, const I8Acts& acts, size_t row_begin,
                  size_t row_end, float* y, size_t ldy) {
  if (m.group != kI8Group || row_begin >= row_end || acts.n == 0)
    return CqGemmI8Reference(m, cb, acts, row_begin, row_end, y, ldy);
  if (acts.n == 1 && m.code_bits != 3) {
    return m.code_bits == 2 ? GemvBits<2>(m, cb, acts, row_begin, row_end, y)
                            : GemvBits<4>(m, cb, acts, row_begin, row_end, y);
  }
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
// vpmaddwd into int32.
int32_t DotI8Avx2(const int8_t* a, const int8_t* b, size_t n) {
  __m256i acc = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i x =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
    const __m256i z =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(x, z));
  }
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
  int32_t s = _mm_cvtsi128_si32(s4);
  for (; i < n; ++i) s += int32_t{a[i]} * int32_t{b[i]};
  return s;
}

namespace {

// Four rows at a time: each 16 values of x are widened once and serve every row (vpmaddwd pairs
// into int32; exact for any int8).
void DotI8RowsOne(const int8_t* a, size_t lda, size_t rows, const int8_t* x, size_t n,
                  int32_t* out) {
  constexpr size_t kRows = 4;
  size_t r = 0;
  for (; r + kRows <= rows; r += kRows) {
    __m256i acc[kRows];
    for (__m256i& v : acc) v = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m256i xv =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
      for (size_t j = 0; j < kRows; ++j) {
        const __m256i av = _mm256_cvtepi8_epi16(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + (r + j) * lda + i)));
        acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(av, xv));
      }
    }
    for (size_t j = 0; j < kRows; ++j) {
      __m128i s4 =
          _mm_add_epi32(_mm256_castsi256_si128(acc[j]), _mm256_extracti128_si256(acc[j], 1));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
      int32_t s = _mm_cvtsi128_si32(s4);
      for (size_t k = i; k < n; ++k) s += int32_t{a[(r + j) * lda + k]} * int32_t{x[k]};
      out[r + j] = s;
    }
  }
  for (; r < rows; ++r) out[r] = DotI8Avx2(a + r * lda, x, n);
}

}  // namespace

void DotI8RowsAvx2(const int8_t* a, size_t lda, size_t rows, const int8_t* x, size_t ldx, size_t nx,
                   size_t n, int32_t* out, size_t ldo) {
  for (size_t t = 0; t < nx; ++t) DotI8RowsOne(a, lda, rows, x + t * ldx, n, out + t * ldo);
}

uint64_t MacPeakAvx2(uint64_t rounds) {
  // vpmaddubsw + vpmaddwd + vpaddd (the gemm's product): 32 MACs per chain step; 12 chains leave
  // the operands in registers (16 ymm).
  constexpr size_t kChains = 12;
  __m256i acc[kChains];
  for (__m256i& v : acc) v = _mm256_setzero_si256();
  __m256i u = _mm256_set1_epi8(3);
  const __m256i s = _mm256_set1_epi8(-5), ones = _mm256_set1_epi16(1);
  for (uint64_t r = 0; r < rounds; ++r)
    for (__m256i& v : acc) {
      __asm__ volatile("" : "+x"(u));  // opaque: no chain's product can be reused or hoisted
      v = _mm256_add_epi32(v, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), ones));
    }
  __m256i sum = acc[0];
  for (size_t j = 1; j < kChains; ++j) sum = _mm256_xor_si256(sum, acc[j]);
  __asm__ volatile("" : : "x"(sum));  // the chains must not be optimized away
  return rounds * kChains * 32;
}

}  // namespace needle::kernels
