// WASM SIMD128 int8 attention (attention_i8.h). Bit-exact with the scalar reference; built with
// -ffp-contract=off. Per key: the query (widened to int16 once per call) times the key row
// (widened once per key, shared by the heads of a kv head) by i32x4.dot_i16x8_s, four heads'
// block dots reduced into one vector, and the f32 score chain with a lane per head. Softmax with a
// lane per head, each lane its own sequential max / sum over the keys. V: per kv head and chunk
// of 16 elements, one or two query heads share each key's converted codes; each output element
// its own chain over the keys in visiting order. Heads beyond a multiple of 4 run the same float
// operations one at a time.
#include <wasm_simd128.h>

#include <algorithm>

#include "kernels/attention_i8.h"
#include "kernels/wasm/kernels_wasm.h"

namespace needle::kernels {

namespace {

constexpr float kNegInit = -1e30f;  // the engine's running-max start
constexpr size_t kHeadLanes = 4;
constexpr size_t kChunk = 16;                               // V: elements per tile
constexpr size_t kMaxCodes = kAttendMaxRow * kAttendBlock;  // heads * head_dim bound
static_assert(kAttendBlock % kChunk == 0);

inline v128_t Load(const void* p) { return wasm_v128_load(p); }
inline void Store(void* p, v128_t v) { wasm_v128_store(p, v); }

void Widen(const int8_t* x, size_t n, int16_t* out) {
  for (size_t i = 0; i < n; i += 16) {
    const v128_t v = Load(x + i);
    Store(out + i, wasm_i16x8_extend_low_i8x16(v));
    Store(out + i + 8, wasm_i16x8_extend_high_i8x16(v));
  }
}

// int32 partial sums of a 64-block dot of int16 vectors.
inline v128_t Dot64(const int16_t* a, const int16_t* b) {
  v128_t acc = wasm_i32x4_dot_i16x8(Load(a), Load(b));
  for (size_t i = 8; i < kAttendBlock; i += 8)
    acc = wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(Load(a + i), Load(b + i)));
  return acc;
}

inline v128_t ReduceLanes4(v128_t v0, v128_t v1, v128_t v2, v128_t v3) {
  const v128_t s01 = wasm_i32x4_add(wasm_i32x4_shuffle(v0, v1, 0, 4, 1, 5),
                                    wasm_i32x4_shuffle(v0, v1, 2, 6, 3, 7));
  const v128_t s23 = wasm_i32x4_add(wasm_i32x4_shuffle(v2, v3, 0, 4, 1, 5),
                                    wasm_i32x4_shuffle(v2, v3, 2, 6, 3, 7));
  return wasm_i32x4_add(wasm_i32x4_shuffle(s01, s23, 0, 1, 4, 5),
                        wasm_i32x4_shuffle(s01, s23, 2, 3, 6, 7));
}

inline int32_t SumLanes(v128_t v) {
  return wasm_i32x4_extract_lane(v, 0) + wasm_i32x4_extract_lane(v, 1) +
         wasm_i32x4_extract_lane(v, 2) + wasm_i32x4_extract_lane(v, 3);
}

// One tile of V: NT query heads (h0 ..) of one kv head, output elements [j0, j0 + 16) of block
// b: acc_tj = c * (float)v_j + acc_tj over the keys in order, c = pw_{i,h} * vs_{p,g,b}.
template <size_t NT>
void VTile(const float* pw, size_t heads, size_t h0, const uint32_t* slots, size_t count,
           const int8_t* v, size_t kv_dim, const float* v_scale, size_t kv_blocks, float* o,
           size_t head_dim) {
  v128_t acc[NT][4];
  for (size_t t = 0; t < NT; ++t)
    for (size_t k = 0; k < 4; ++k) acc[t][k] = wasm_f32x4_splat(0.f);
  for (size_t i = 0; i < count; ++i) {
    const size_t slot = slots[i];
    const v128_t codes = Load(v + slot * kv_dim);
    const v128_t lo = wasm_i16x8_extend_low_i8x16(codes), hi = wasm_i16x8_extend_high_i8x16(codes);
    const v128_t x[4] = {wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(lo)),
                         wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(lo)),
                         wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(hi)),
                         wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(hi))};
    const float vs = v_scale[slot * kv_blocks];
    for (size_t t = 0; t < NT; ++t) {
      const v128_t c = wasm_f32x4_splat(pw[i * heads + h0 + t] * vs);
      for (size_t k = 0; k < 4; ++k) acc[t][k] = wasm_f32x4_add(wasm_f32x4_mul(c, x[k]), acc[t][k]);
    }
  }
  for (size_t t = 0; t < NT; ++t)
    for (size_t k = 0; k < 4; ++k) Store(o + t * head_dim + 4 * k, acc[t][k]);
}

}  // namespace

void AttendI8Simd128(const I8Queries& q, const I8KvView& kv, const uint32_t* slots, size_t count,
                     AttendExpfFn expf_array, float* scores, float* o) {
  const size_t H = q.heads, hd = kv.head_dim, kvd = kv.kv_heads * hd;
  const size_t group = H / kv.kv_heads, nb = hd / kAttendBlock, kvb = kvd / kAttendBlock;
  if (H * nb > kAttendMaxRow) {
    AttendI8Reference(q, kv, slots, count, expf_array, scores, o);
    return;
  }
  // Widened query and key rows (kvd <= H * hd <= kMaxCodes); single-threaded callers only in a
  // wasm module, but thread_local keeps concurrent sessions apart should threads ever come.
  static thread_local int16_t q16[kMaxCodes], k16[kMaxCodes];
  Widen(q.q, H * hd, q16);
  const size_t H4 = H / kHeadLanes * kHeadLanes;

  // 1. Scores, key-major [count, H].
  for (size_t i = 0; i < count; ++i) {
    const size_t slot = slots[i];
    Widen(kv.k + slot * kvd, kvd, k16);
    const float* ks = kv.k_scale + slot * kvb;
    float* srow = scores + i * H;
    for (size_t h = 0; h < H4; h += kHeadLanes) {
      v128_t acc = wasm_f32x4_splat(0.f);
      for (size_t b = 0; b < nb; ++b) {
        v128_t parts[kHeadLanes];
        float scale[kHeadLanes];
        for (size_t l = 0; l < kHeadLanes; ++l) {
          const size_t g = (h + l) / group;
          parts[l] = Dot64(q16 + (h + l) * hd + b * kAttendBlock, k16 + g * hd + b * kAttendBlock);
          scale[l] = ks[g * nb + b];
        }
        const v128_t dot =
            wasm_f32x4_convert_i32x4(ReduceLanes4(parts[0], parts[1], parts[2], parts[3]));
        const v128_t s = wasm_f32x4_make(scale[0], scale[1], scale[2], scale[3]);
        acc = wasm_f32x4_add(wasm_f32x4_mul(dot, s), acc);
      }
      Store(srow + h, wasm_f32x4_mul(acc, wasm_v128_load(q.qse + h)));
    }
    for (size_t h = H4; h < H; ++h) {
      const size_t g = h / group;
      float acc = 0.f;
      for (size_t b = 0; b < nb; ++b) {
        const int32_t dot =
            SumLanes(Dot64(q16 + h * hd + b * kAttendBlock, k16 + g * hd + b * kAttendBlock));
        acc = static_cast<float>(dot) * ks[g * nb + b] + acc;
      }
      srow[h] = acc * q.qse[h];
    }
  }

  // 2. Softmax per head (a lane per head): max, s - max, exps, sequential sum, e * invs.
  alignas(16) float mx[kAttendMaxRow];
  for (size_t h = 0; h < H4; h += kHeadLanes) {
    v128_t m = wasm_f32x4_splat(kNegInit);
    for (size_t i = 0; i < count; ++i) m = wasm_f32x4_pmax(m, Load(scores + i * H + h));
    Store(mx + h, m);
  }
  for (size_t h = H4; h < H; ++h) {
    float m = kNegInit;
    for (size_t i = 0; i < count; ++i)
      if (m < scores[i * H + h]) m = scores[i * H + h];
    mx[h] = m;
  }
  for (size_t i = 0; i < count; ++i) {
    float* srow = scores + i * H;
    for (size_t h = 0; h < H4; h += kHeadLanes)
      Store(srow + h, wasm_f32x4_sub(Load(srow + h), Load(mx + h)));
    for (size_t h = H4; h < H; ++h) srow[h] = srow[h] - mx[h];
  }
  expf_array(scores, scores, count * H);
  for (size_t h = 0; h < H4; h += kHeadLanes) {
    v128_t sum = wasm_f32x4_splat(0.f);
    for (size_t i = 0; i < count; ++i) sum = wasm_f32x4_add(sum, Load(scores + i * H + h));
    const v128_t invs = wasm_f32x4_div(wasm_f32x4_splat(1.0f), sum);
    for (size_t i = 0; i < count; ++i)
      Store(scores + i * H + h, wasm_f32x4_mul(Load(scores + i * H + h), invs));
  }
  for (size_t h = H4; h < H; ++h) {
    float sum = 0.f;
    for (size_t i = 0; i < count; ++i) sum = sum + scores[i * H + h];
    const float invs = 1.0f / sum;
    for (size_t i = 0; i < count; ++i) scores[i * H + h] = scores[i * H + h] * invs;
  }

  // 3. V, per kv head, chunk of head_dim and pair of its query heads.
  for (size_t g = 0; g < kv.kv_heads; ++g) {
    for (size_t j0 = 0; j0 < hd; j0 += kChunk) {
      const int8_t* v = kv.v + g * hd + j0;
      const float* vs = kv.v_scale + g * nb + j0 / kAttendBlock;
      for (size_t h = g * group; h < (g + 1) * group;) {
        float* oh = o + h * hd + j0;
        if ((g + 1) * group - h >= 2) {
          VTile<2>(scores, H, h, slots, count, v, kvd, vs, kvb, oh, hd);
          h += 2;
        } else {
          VTile<1>(scores, H, h, slots, count, v, kvd, vs, kvb, oh, hd);
          h += 1;
        }
      }
    }
  }
}

}  // namespace needle::kernels
