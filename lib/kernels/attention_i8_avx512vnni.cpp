// AVX-512 + VNNI int8 attention (attention_i8.h): attention_i8_x86_impl.h compiled with
// -mavx512vnni (vpdpbusd on keys offset by +128), and the block kernel of a prefill call's tokens
// (AttendI8BlockAvx512Vnni). Bit-exact with the scalar reference; built with
// -ffp-contract=off. Only called when the CPU has AVX512_VNNI (checked by the dispatcher).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/attention_i8_x86_impl.h"  // first: includes <immintrin.h> (see there)

#if !defined(__AVX512VNNI__)
#error "attention_i8_avx512vnni.cpp must be compiled with -mavx512vnni (CMakeLists.txt)"
#endif

namespace needle::kernels {

void AttendI8Avx512Vnni(const I8Queries& q, const I8KvView& kv, const uint32_t* slots, size_t count,
                        AttendExpfFn expf_array, float* scores, float* o) {
  AttendX86<Avx512Policy>(q, kv, slots, count, expf_array, scores, o);
}

namespace {

// Query rows (token, head of the kv head's group) per V tile: 4 rows x 4 vectors of 16 values.
constexpr size_t kRowTile = 4;
constexpr size_t kVecs = kAttendBlock / 16;  // vectors per 64-value block
constexpr size_t kAhead = 8;                 // keys ahead whose rows are prefetched

// Scores of 16 * ZN rows (lane vectors z0 .. z0 + ZN - 1) for keys [0, count): per block the
// int32 dots as vpdpbusd of the key's dwords (+128 each byte, broadcast) against the rows'
// transposed codes, minus the rows' 128 * sum(q); then the reference's float chain over the
// blocks and the product by the row's qse. e [key][row].
template <size_t ZN>
void ScoreRows(const int32_t* qt, const int32_t* bias, const float* qse, size_t rows, size_t z0,
               const int8_t* k, const float* k_scale, size_t kvd, size_t kvb, size_t nb,
               const uint32_t* slots, size_t count, float* e) {
  const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
  for (size_t i = 0; i < count; ++i) {
    const size_t slot = slots[i];
    const int8_t* kr = k + slot * kvd;
    if (i + kAhead < count)
      for (size_t b = 0; b < nb; ++b)
        _mm_prefetch(reinterpret_cast<const char*>(k + slots[i + kAhead] * kvd + b * kAttendBlock),
                     _MM_HINT_T0);
    __m512 f[ZN];
    for (size_t z = 0; z < ZN; ++z) f[z] = _mm512_setzero_ps();
    for (size_t b = 0; b < nb; ++b) {
      __m512i acc[ZN];
      for (size_t z = 0; z < ZN; ++z) acc[z] = _mm512_setzero_si512();
      for (size_t d4 = 0; d4 < kAttendBlock / 4; ++d4) {
        int32_t w;
        std::memcpy(&w, kr + b * kAttendBlock + 4 * d4, 4);
        const __m512i kb = _mm512_xor_si512(_mm512_set1_epi32(w), offset);
        const int32_t* qd = qt + (b * (kAttendBlock / 4) + d4) * rows + 16 * z0;
        for (size_t z = 0; z < ZN; ++z)
          acc[z] = _mm512_dpbusd_epi32(acc[z], kb, _mm512_load_si512(qd + 16 * z));
      }
      const __m512 ks = _mm512_set1_ps(k_scale[slot * kvb + b]);
      for (size_t z = 0; z < ZN; ++z) {
        const __m512i dot =
            _mm512_sub_epi32(acc[z], _mm512_load_si512(bias + b * rows + 16 * (z0 + z)));
        f[z] = _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(dot), ks), f[z]);
      }
    }
    for (size_t z = 0; z < ZN; ++z)
      _mm512_store_ps(e + i * rows + 16 * (z0 + z),
                      _mm512_mul_ps(f[z], _mm512_load_ps(qse + 16 * (z0 + z))));
  }
}

}  // namespace

void AttendI8BlockAvx512Vnni(const I8QueryBlock& q, const I8KvView& kv, const uint32_t* slots,
                             AttendExpfFn expf_array, void* scratch, float* o) {
  const size_t H = q.heads, T = q.tokens, hd = kv.head_dim, kvd = kv.Row();
  const size_t group = H / kv.kv_heads, nb = hd / kAttendBlock, kvb = kvd / kAttendBlock;
  const size_t R = T * group, rows = (R + 15) / 16 * 16, Z = rows / 16;
  size_t cmax = 0;
  for (size_t t = 0; t < T; ++t) cmax = std::max(cmax, q.counts[t]);
  // The scratch areas (AttendI8BlockScratchBytes), reused for every kv head.
  char* p = static_cast<char*>(scratch);
  p += (64 - reinterpret_cast<uintptr_t>(p) % 64) % 64;  // to a 64-byte boundary
  auto take = [&p](size_t bytes) {
    char* a = p;
    p += (bytes + 63) / 64 * 64;
    return a;
  };
  auto* qt = reinterpret_cast<int32_t*>(take(nb * 16 * rows * 4));  // [b][dword][row]
  auto* bias = reinterpret_cast<int32_t*>(take(nb * rows * 4));     // [b][row]: 128 * sum(q)
  auto* qse = reinterpret_cast<float*>(take(rows * 4));
  auto* cnt = reinterpret_cast<int32_t*>(take(rows * 4));
  // The weights [b][key][row]; block 0's area first holds the exps [key][row] (each key's weights
  // replace its exps once read).
  auto* cw = reinterpret_cast<float*>(take(nb * cmax * rows * 4));
  float* e = cw;
  auto* vf = reinterpret_cast<float*>(take(cmax * hd * 4));  // [key][j]
  if (cmax == 0) {
    std::fill(o, o + T * H * hd, 0.f);  // no key: the reference's sums stay 0
    return;
  }
  for (size_t g = 0; g < kv.kv_heads; ++g) {
    // Row r = t * group + hh is query head g * group + hh of token t; rows past R are padding
    // (no keys, zero codes).
    for (size_t r = 0; r < rows; ++r) {
      const bool real = r < R;
      const size_t t = real ? r / group : 0, h = g * group + (real ? r % group : 0);
      const int8_t* qr = q.q + (t * H + h) * hd;
      for (size_t b = 0; b < nb; ++b) {
        int32_t sum = 0;
        for (size_t d4 = 0; d4 < kAttendBlock / 4; ++d4) {
          int32_t w = 0;
          if (real) {
            std::memcpy(&w, qr + b * kAttendBlock + 4 * d4, 4);
            for (size_t j = 0; j < 4; ++j) sum += qr[b * kAttendBlock + 4 * d4 + j];
          }
          qt[(b * (kAttendBlock / 4) + d4) * rows + r] = w;
        }
        bias[b * rows + r] = 128 * sum;
      }
      qse[r] = real ? q.qse[t * H + h] : 0.f;
      cnt[r] = real ? static_cast<int32_t>(q.counts[t]) : 0;
    }
    // 1. Scores [key][row] (every row over every key of the longest list; a row's keys past its
    // count are never used).
    const int8_t* k = kv.k + g * hd;
    const float* ks = kv.k_scale + g * nb;
    for (size_t z0 = 0; z0 < Z; z0 += 4) {
      switch (std::min<size_t>(4, Z - z0)) {
        case 4:
          ScoreRows<4>(qt, bias, qse, rows, z0, k, ks, kvd, kvb, nb, slots, cmax, e);
          break;
        case 3:
          ScoreRows<3>(qt, bias, qse, rows, z0, k, ks, kvd, kvb, nb, slots, cmax, e);
          break;
        case 2:
          ScoreRows<2>(qt, bias, qse, rows, z0, k, ks, kvd, kvb, nb, slots, cmax, e);
          break;
        default:
          ScoreRows<1>(qt, bias, qse, rows, z0, k, ks, kvd, kvb, nb, slots, cmax, e);
      }
    }
    // 2. Softmax, a lane per row over its own keys (lanes past a row's count masked): the running
    // max from kAttendNegInit (vmaxps(s, m): m unless s > m), s - m, the exps, the sequential sum,
    // then the weights (e * invs) * v_scale per block, 0 past the row's count.
    for (size_t z = 0; z < Z; ++z) {
      const __m512i cz = _mm512_load_si512(cnt + 16 * z);
      __m512 m = _mm512_set1_ps(kAttendNegInit);
      for (size_t i = 0; i < cmax; ++i) {
        const __mmask16 live = _mm512_cmpgt_epi32_mask(cz, _mm512_set1_epi32(static_cast<int>(i)));
        m = _mm512_mask_max_ps(m, live, _mm512_load_ps(e + i * rows + 16 * z), m);
      }
      for (size_t i = 0; i < cmax; ++i) {
        float* ei = e + i * rows + 16 * z;
        _mm512_store_ps(ei, _mm512_sub_ps(_mm512_load_ps(ei), m));
      }
    }
    expf_array(e, e, cmax * rows);
    const float* vs = kv.v_scale + g * nb;
    for (size_t z = 0; z < Z; ++z) {
      const __m512i cz = _mm512_load_si512(cnt + 16 * z);
      __m512 sum = _mm512_setzero_ps();
      for (size_t i = 0; i < cmax; ++i) {
        const __mmask16 live = _mm512_cmpgt_epi32_mask(cz, _mm512_set1_epi32(static_cast<int>(i)));
        sum = _mm512_mask_add_ps(sum, live, sum, _mm512_load_ps(e + i * rows + 16 * z));
      }
      const __m512 invs = _mm512_div_ps(_mm512_set1_ps(1.0f), sum);
      for (size_t i = 0; i < cmax; ++i) {
        const __mmask16 live = _mm512_cmpgt_epi32_mask(cz, _mm512_set1_epi32(static_cast<int>(i)));
        const __m512 pw = _mm512_mul_ps(_mm512_load_ps(e + i * rows + 16 * z), invs);
        for (size_t b = 0; b < nb; ++b)
          _mm512_store_ps(cw + (b * cmax + i) * rows + 16 * z,
                          _mm512_maskz_mul_ps(live, pw, _mm512_set1_ps(vs[slots[i] * kvb + b])));
      }
    }
    // 3. V: each key's values converted once; per tile of kRowTile rows and 64-value block,
    // acc = c * v + acc over the keys in order (a zero weight past a row's count adds +-0 to a
    // sum that starts at +0 and so is never -0: the bits of stopping there).
    const int8_t* v = kv.v + g * hd;
    for (size_t i = 0; i < cmax; ++i) {
      const int8_t* vr = v + slots[i] * kvd;
      if (i + kAhead < cmax)
        for (size_t b = 0; b < nb; ++b)
          _mm_prefetch(
              reinterpret_cast<const char*>(v + slots[i + kAhead] * kvd + b * kAttendBlock),
              _MM_HINT_T0);
      for (size_t j = 0; j < hd; j += 16)
        _mm512_store_ps(vf + i * hd + j, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(
                                             reinterpret_cast<const __m128i*>(vr + j)))));
    }
    for (size_t r0 = 0; r0 < R; r0 += kRowTile) {
      size_t tcount = 0;
      for (size_t r = r0; r < r0 + kRowTile; ++r)
        tcount = std::max(tcount, static_cast<size_t>(cnt[r]));
      for (size_t b = 0; b < nb; ++b) {
        __m512 acc[kRowTile][kVecs];
        for (auto& row : acc)
          for (__m512& a : row) a = _mm512_setzero_ps();
        const float* cb = cw + b * cmax * rows + r0;
        const float* xb = vf + b * kAttendBlock;
        for (size_t i = 0; i < tcount; ++i) {
          __m512 x[kVecs];
          for (size_t u = 0; u < kVecs; ++u) x[u] = _mm512_load_ps(xb + i * hd + 16 * u);
          for (size_t rr = 0; rr < kRowTile; ++rr) {
            const __m512 c = _mm512_set1_ps(cb[i * rows + rr]);
            for (size_t u = 0; u < kVecs; ++u)
              acc[rr][u] = _mm512_add_ps(_mm512_mul_ps(c, x[u]), acc[rr][u]);
          }
        }
        for (size_t rr = 0; rr < kRowTile && r0 + rr < R; ++rr) {
          const size_t r = r0 + rr, t = r / group, h = g * group + r % group;
          float* out = o + (t * H + h) * hd + b * kAttendBlock;
          for (size_t u = 0; u < kVecs; ++u) _mm512_storeu_ps(out + 16 * u, acc[rr][u]);
        }
      }
    }
  }
}

}  // namespace needle::kernels
