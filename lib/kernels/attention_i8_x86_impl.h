// The x86 driver of the int8 attention kernel (attention_i8.h), written once and compiled in three
// translation units with their own flags and an ISA policy each: attention_i8_avx2.cpp,
// attention_i8_avx512.cpp and attention_i8_avx512vnni.cpp. Everything here has internal linkage so
// the differently-compiled copies never meet at link time. Bit-exact: built with -ffp-contract=off.
//
// Per key (slot p): the heads * nb int32 block dots (entries e = b * heads + h) are computed as
// vectors of partial sums (policy Dot64), eight at a time reduced into one vector of eight lanes
// and stored in a row; the f32 score chain then runs with a lane per head (8 heads per ymm, the
// k scales picked per lane by a permute of the slot's scale row, or a gather when the row is
// longer than one vector). Softmax: key-major scores [count, heads], a ymm lane per head, each lane
// its own sequential max / sum over the keys. V: per kv head and chunk of 4 vectors of head_dim,
// the group's query heads in tiles of NT share each key's converted codes; each output element
// its own chain over the keys in visiting order. Heads beyond a multiple of 8 run the same float
// operations one at a time.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/attention_i8.h"
#include "kernels/lane_algorithms.h"
#include "kernels/x86_lanes.h"

namespace needle::kernels {
namespace {  // NOLINT(cert-dcl59-cpp, google-build-namespaces): one private copy per ISA file

constexpr size_t kHeadLanes = 8;     // heads per ymm in the softmax and score chains
constexpr size_t kCodeVectors = 4;   // V: vectors of head_dim per chunk
constexpr size_t kPrefetchKeys = 8;  // keys ahead whose K / V rows are prefetched

// Sum of each input's int32 lanes: lane l of the result = sum of the lanes of p[l] (exact).
inline __m256i Reduce8(const __m256i p[8]) {
  auto pair32 = [](__m256i a, __m256i b) {
    return _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
  };
  auto pair64 = [](__m256i a, __m256i b) {
    return _mm256_add_epi32(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
  };
  const __m256i abcd = pair64(pair32(p[0], p[1]), pair32(p[2], p[3]));
  const __m256i efgh = pair64(pair32(p[4], p[5]), pair32(p[6], p[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(abcd, efgh, 0x20),
                          _mm256_permute2x128_si256(abcd, efgh, 0x31));
}

#if defined(__AVX512F__)
inline __m256i Reduce8(const __m512i p[8]) {
  auto pair32 = [](__m512i a, __m512i b) {
    return _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
  };
  auto pair64 = [](__m512i a, __m512i b) {
    return _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
  };
  // Per 128-bit lane L: [a_L, b_L, c_L, d_L] and [e_L, ..., h_L].
  const __m512i x = pair64(pair32(p[0], p[1]), pair32(p[2], p[3]));
  const __m512i y = pair64(pair32(p[4], p[5]), pair32(p[6], p[7]));
  // [x0 + x2, x1 + x3, y0 + y2, y1 + y3], then [x0123, y0123].
  const __m512i s = _mm512_add_epi32(_mm512_shuffle_i32x4(x, y, _MM_SHUFFLE(1, 0, 1, 0)),
                                     _mm512_shuffle_i32x4(x, y, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512i r = _mm512_add_epi32(_mm512_shuffle_i32x4(s, s, _MM_SHUFFLE(2, 0, 2, 0)),
                                     _mm512_shuffle_i32x4(s, s, _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_castsi512_si256(r);
}
#endif

// The key row (the view's codes) of a key a few ahead, and its value row for step 3: the V passes
// (one per kv head) then find every row in cache instead of waiting for L3 on each key (they read
// the ring through the slot list, one 64-byte line per row and pass).
inline void PrefetchKeyRows(const I8KvView& kv, size_t slot, size_t kvd) {
  const char* k = reinterpret_cast<const char*>(kv.k + slot * kvd);
  const char* v = reinterpret_cast<const char*>(kv.v + slot * kvd);
  for (size_t off = 0; off < kv.kv_heads * kv.head_dim; off += 64) {
    _mm_prefetch(k + off, _MM_HINT_T0);
    _mm_prefetch(v + off, _MM_HINT_T0);
  }
}

// One tile of V: NT query heads (h0 ..) of kv head g, output elements [j0, j0 + 4 * kLanes) in
// block b. acc_tj = c * (float)v_j + acc_tj over the keys in order, c = pw_{i,h} * vs_{p,g,b}.
template <class Isa, int NT>
void VTile(const float* pw, size_t heads, size_t h0, const uint32_t* slots, size_t count,
           const int8_t* v, size_t kv_dim, const float* v_scale, size_t kv_blocks, float* o,
           size_t head_dim) {
  using Vec = typename Isa::Vec;
  Vec acc[NT][kCodeVectors];
  for (int t = 0; t < NT; ++t)
    for (size_t k = 0; k < kCodeVectors; ++k) acc[t][k] = Isa::Zero();
  for (size_t i = 0; i < count; ++i) {
    const size_t slot = slots[i];
    const int8_t* vp = v + slot * kv_dim;
    // The ring is read through the slot list and misses L2 (L3 latency on every key): ask
    // for the row a few keys ahead.
    if (i + kPrefetchKeys < count)
      _mm_prefetch(reinterpret_cast<const char*>(v + slots[i + kPrefetchKeys] * kv_dim),
                   _MM_HINT_T0);
    const float vs = v_scale[slot * kv_blocks];
    Vec x[kCodeVectors];
    for (size_t k = 0; k < kCodeVectors; ++k) x[k] = Isa::LoadCodes(vp + k * Isa::kLanes);
    for (int t = 0; t < NT; ++t) {
      const Vec c = Isa::Set1(pw[i * heads + h0 + static_cast<size_t>(t)] * vs);
      for (size_t k = 0; k < kCodeVectors; ++k) acc[t][k] = Isa::Add(Isa::Mul(c, x[k]), acc[t][k]);
    }
  }
  for (int t = 0; t < NT; ++t)
    for (size_t k = 0; k < kCodeVectors; ++k)
      Isa::Store(o + static_cast<size_t>(t) * head_dim + k * Isa::kLanes, acc[t][k]);
}

#if defined(__AVX512F__) && defined(__AVX512VNNI__)
// Step 1 of AttendX86 for 8 heads of one 64-block each (E = 8) with VNNI: the 8 query blocks
// stay in registers and each kv head's key block is loaded and offset (+128) once for the heads
// that read it; then the reduction, the bias and the score chain as in the general loop.
template <size_t kGroup>
void ScoresVnni8(const I8Queries& q, const I8KvView& kv, const uint32_t* slots, size_t count,
                 size_t kvd, size_t kvb, const int32_t* scale_idx, const int32_t* bias,
                 float* scores) {
  const size_t hd = kv.head_dim;
  __m512i qv[8];
  for (size_t h = 0; h < 8; ++h) qv[h] = _mm512_loadu_si512(q.q + h * hd);
  const __m256i bias_v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bias));
  const __m256i idx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(scale_idx));
  const __m256 qse = _mm256_loadu_ps(q.qse);
  const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
  const __mmask16 scale_mask = static_cast<__mmask16>((1u << kv.kv_heads) - 1);
  for (size_t i = 0; i < count; ++i) {
    const size_t slot = slots[i];
    const int8_t* krow = kv.k + slot * kvd;
    if (i + kPrefetchKeys < count) PrefetchKeyRows(kv, slots[i + kPrefetchKeys], kvd);
    __m512i parts[8];
    for (size_t g = 0; g < 8 / kGroup; ++g) {
      const __m512i ku = _mm512_xor_si512(_mm512_loadu_si512(krow + g * hd), offset);
      for (size_t h = g * kGroup; h < (g + 1) * kGroup; ++h)
        parts[h] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ku, qv[h]);
    }
    const __m256i dot = _mm256_sub_epi32(Reduce8(parts), bias_v);
    const __m512 table = _mm512_maskz_loadu_ps(scale_mask, kv.k_scale + slot * kvb);
    const __m256 ks =
        _mm512_castps512_ps256(_mm512_permutexvar_ps(_mm512_zextsi256_si512(idx), table));
    const __m256 acc =
        _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(dot), ks), _mm256_setzero_ps());
    _mm256_storeu_ps(scores + i * 8, _mm256_mul_ps(acc, qse));
  }
}
#endif

template <class Isa>
void AttendX86(const I8Queries& q, const I8KvView& kv, const uint32_t* slots, size_t count,
               AttendExpfFn expf_array, float* scores, float* o) {
  const size_t H = q.heads, hd = kv.head_dim, kvd = kv.Row();  // slot stride
  const size_t group = H / kv.kv_heads, nb = hd / kAttendBlock, kvb = kvd / kAttendBlock;
  const size_t scales = kv.kv_heads * nb;  // a slot's scales in the view (kvb: the stride)
  const size_t E = H * nb;                 // block dots per key
  if (E > kAttendMaxRow) {
    AttendI8Reference(q, kv, slots, count, expf_array, scores, o);
    return;
  }
  const size_t H8 = H / kHeadLanes * kHeadLanes;
  // Per entry e = b * H + h: offsets of the query / key block, the kv scale index, the VNNI bias.
  // (8 spare entries: the last heads' masked vector reads up to 7 entries past E.)
  alignas(32) uint32_t q_off[kAttendMaxRow], k_off[kAttendMaxRow];
  alignas(32) int32_t scale_idx[kAttendMaxRow + 8], bias[kAttendMaxRow];
  for (size_t e = 0; e < E; ++e) {
    const size_t b = e / H, h = e % H, g = h / group;
    q_off[e] = static_cast<uint32_t>(h * hd + b * kAttendBlock);
    k_off[e] = static_cast<uint32_t>(g * hd + b * kAttendBlock);
    scale_idx[e] = static_cast<int32_t>(g * nb + b);
    bias[e] = Isa::Bias(q.q + q_off[e]);
  }
  for (size_t e = E; e % 8 != 0; ++e) bias[e] = 0;      // the last reduction's unused lanes
  for (size_t e = E; e < E + 8; ++e) scale_idx[e] = 0;  // masked lanes: an in-range scale
  const typename Isa::ScaleMask scale_mask = Isa::MakeScaleMask(scales);
  const __m256i tail_mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(H - H8)),
                                               _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));

  // 1. Scores, key-major [count, H].
  alignas(32) int32_t row[kAttendMaxRow + 8] = {};
  const size_t E8 = E / 8 * 8;
  bool scored = false;
#if defined(__AVX512F__) && defined(__AVX512VNNI__)
  if constexpr (Isa::kBias) {
    if (E == 8 && nb == 1) {
      scored = true;
      switch (group) {
        case 1:
          ScoresVnni8<1>(q, kv, slots, count, kvd, kvb, scale_idx, bias, scores);
          break;
        case 2:
          ScoresVnni8<2>(q, kv, slots, count, kvd, kvb, scale_idx, bias, scores);
          break;
        case 4:
          ScoresVnni8<4>(q, kv, slots, count, kvd, kvb, scale_idx, bias, scores);
          break;
        default:
          ScoresVnni8<8>(q, kv, slots, count, kvd, kvb, scale_idx, bias, scores);
      }
    }
  }
#endif
  for (size_t i = 0; !scored && i < count; ++i) {
    const size_t slot = slots[i];
    const int8_t* krow = kv.k + slot * kvd;
    if (i + kPrefetchKeys < count) PrefetchKeyRows(kv, slots[i + kPrefetchKeys], kvd);
    const float* ks = kv.k_scale + slot * kvb;
    for (size_t e0 = 0; e0 < E; e0 += 8) {
      typename Isa::Part parts[8];
      if (e0 < E8) {
        for (size_t l = 0; l < 8; ++l)
          parts[l] = Isa::Dot64(q.q + q_off[e0 + l], krow + k_off[e0 + l]);
      } else {
        for (size_t l = 0; l < 8; ++l)
          parts[l] =
              e0 + l < E ? Isa::Dot64(q.q + q_off[e0 + l], krow + k_off[e0 + l]) : Isa::PartZero();
      }
      __m256i r = Reduce8(parts);
      if constexpr (Isa::kBias)
        r = _mm256_sub_epi32(r, _mm256_load_si256(reinterpret_cast<const __m256i*>(bias + e0)));
      _mm256_store_si256(reinterpret_cast<__m256i*>(row + e0), r);
    }
    float* srow = scores + i * H;
    const typename Isa::ScaleTable table = Isa::LoadScales(ks, scales, scale_mask);
    // The score chains of heads h .. h + 7, a lane each (over the blocks in order).
    auto chains = [&](size_t h) {
      __m256 acc = _mm256_setzero_ps();
      for (size_t b = 0; b < nb; ++b) {
        const size_t e = b * H + h;
        const __m256i idx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(scale_idx + e));
        const __m256 dot =
            _mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + e)));
        acc = _mm256_add_ps(_mm256_mul_ps(dot, Isa::PickScales(table, ks, scales, idx)), acc);
      }
      return acc;
    };
    for (size_t h = 0; h < H8; h += kHeadLanes)
      _mm256_storeu_ps(srow + h, _mm256_mul_ps(chains(h), _mm256_loadu_ps(q.qse + h)));
    if (H8 < H)  // the last H - H8 heads in the low lanes, the others masked off (never used)
      _mm256_maskstore_ps(srow + H8, tail_mask,
                          _mm256_mul_ps(chains(H8), _mm256_maskload_ps(q.qse + H8, tail_mask)));
  }

  // 2. Softmax per head (a lane per head): kernels/lane_algorithms.h.
  // A ymm lane per head; a head count with a remainder of 4 (a thread's half of 8 heads, 12
  // heads) in xmm lanes rather than one head at a time.
  if (H % kHeadLanes != 0 && H % 4 == 0) {
    SoftmaxHeadsLanes<F32x4>(scores, count, H, expf_array);
  } else {
    SoftmaxHeadsLanes<F32x8>(scores, count, H, expf_array);
  }

  // 3. V, per kv head, chunk of head_dim and tile of its query heads.
  constexpr size_t kChunk = kCodeVectors * Isa::kLanes;
  static_assert(kAttendBlock % kChunk == 0);
  for (size_t g = 0; g < kv.kv_heads; ++g) {
    for (size_t j0 = 0; j0 < hd; j0 += kChunk) {
      const int8_t* v = kv.v + g * hd + j0;
      const float* vs = kv.v_scale + g * nb + j0 / kAttendBlock;
      size_t h = g * group;
      const size_t h_end = h + group;
      while (h < h_end) {
        float* oh = o + h * hd + j0;
        if (Isa::kMaxTile >= 4 && h_end - h >= 4) {
          VTile<Isa, Isa::kMaxTile >= 4 ? 4 : 1>(scores, H, h, slots, count, v, kvd, vs, kvb, oh,
                                                 hd);
          h += 4;
        } else if (h_end - h >= 2) {
          VTile<Isa, 2>(scores, H, h, slots, count, v, kvd, vs, kvb, oh, hd);
          h += 2;
        } else {
          VTile<Isa, 1>(scores, H, h, slots, count, v, kvd, vs, kvb, oh, hd);
          h += 1;
        }
      }
    }
  }
}

// AVX2: vpsignb / vpmaddubsw / vpmaddwd dots (|k| * sign-moved q: pair sums <= 2 * 127 * 127, no
// saturation); 8 floats per vector.
struct Avx2Policy {
  using Part = __m256i;
  using Vec = __m256;
  using ScaleMask = __m256i;
  using ScaleTable = __m256;
  static constexpr size_t kLanes = 8;
  static constexpr int kMaxTile = 2;
  static constexpr bool kBias = false;

  static Part PartZero() { return _mm256_setzero_si256(); }
  static int32_t Bias(const int8_t* /*q*/) { return 0; }
  static Part Dot64(const int8_t* q, const int8_t* k) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i sum = _mm256_setzero_si256();
    for (size_t half = 0; half < 2; ++half) {
      const __m256i kv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + 32 * half));
      const __m256i qv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * half));
      const __m256i p16 = _mm256_maddubs_epi16(_mm256_abs_epi8(kv), _mm256_sign_epi8(qv, kv));
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p16, ones));
    }
    return sum;
  }
  static ScaleMask MakeScaleMask(size_t n) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n < 8 ? n : 8)), lane);
  }
  static ScaleTable LoadScales(const float* row, size_t n, ScaleMask mask) {
    return n <= 8 ? _mm256_maskload_ps(row, mask) : _mm256_setzero_ps();
  }
  static __m256 PickScales(ScaleTable table, const float* row, size_t n, __m256i idx) {
    return n <= 8 ? _mm256_permutevar8x32_ps(table, idx) : _mm256_i32gather_ps(row, idx, 4);
  }

  static Vec Zero() { return _mm256_setzero_ps(); }
  static Vec Set1(float x) { return _mm256_set1_ps(x); }
  static Vec Mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  static Vec Add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static Vec LoadCodes(const int8_t* p) {
    return _mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static void Store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
};

#if defined(__AVX512F__) && defined(__AVX512BW__)
// AVX-512: 64-byte blocks in one vector. With VNNI, vpdpbusd on k + 128 (unsigned) and q, minus
// the exact 128 * sum(q) per entry afterwards; without, |k| and q negated where k < 0 (masked)
// through vpmaddubsw / vpmaddwd. 16 floats per vector.
struct Avx512Policy {
#if defined(__AVX512VNNI__)
  static constexpr bool kBias = true;
#else
  static constexpr bool kBias = false;
#endif
  using Part = __m512i;
  using Vec = __m512;
  using ScaleMask = __mmask16;
  using ScaleTable = __m512;
  static constexpr size_t kLanes = 16;
  static constexpr int kMaxTile = 4;

  static Part PartZero() { return _mm512_setzero_si512(); }
  static int32_t Bias(const int8_t* q) {
    int32_t s = 0;
    for (size_t j = 0; j < kAttendBlock; ++j) s += q[j];
    return kBias ? 128 * s : 0;
  }
  static Part Dot64(const int8_t* q, const int8_t* k) {
    const __m512i kv = _mm512_loadu_si512(k);
    const __m512i qv = _mm512_loadu_si512(q);
#if defined(__AVX512VNNI__)
    const __m512i ku = _mm512_xor_si512(kv, _mm512_set1_epi8(static_cast<char>(0x80)));
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), ku, qv);
#else
    const __mmask64 neg = _mm512_movepi8_mask(kv);
    const __m512i qs = _mm512_mask_sub_epi8(qv, neg, _mm512_setzero_si512(), qv);
    return _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_abs_epi8(kv), qs), _mm512_set1_epi16(1));
#endif
  }
  static ScaleMask MakeScaleMask(size_t n) {
    return static_cast<__mmask16>(n >= 16 ? 0xffff : (1u << n) - 1);
  }
  static ScaleTable LoadScales(const float* row, size_t n, ScaleMask mask) {
    return n <= 16 ? _mm512_maskz_loadu_ps(mask, row) : _mm512_setzero_ps();
  }
  static __m256 PickScales(ScaleTable table, const float* row, size_t n, __m256i idx) {
    return n <= 16
               ? _mm512_castps512_ps256(_mm512_permutexvar_ps(_mm512_zextsi256_si512(idx), table))
               : _mm256_i32gather_ps(row, idx, 4);
  }

  static Vec Zero() { return _mm512_setzero_ps(); }
  static Vec Set1(float x) { return _mm512_set1_ps(x); }
  static Vec Mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
  static Vec Add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  static Vec LoadCodes(const int8_t* p) {
    return _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static void Store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
};
#endif

}  // namespace
}  // namespace needle::kernels
