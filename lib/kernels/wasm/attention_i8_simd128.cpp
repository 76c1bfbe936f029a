// WASM SIMD128 int8 attention (attention_i8.h). Bit-exact with the scalar reference; built with
// -ffp-contract=off. Scores: the query split once per call into int16 (even and odd codes of each
// 16-code block, simd128::WidenSplit), each key block's codes split in registers by a shift and a
// mask and shared by the query heads of its kv head, the int32 dots by i32x4.dot_i16x8_s, four
// heads' dots reduced into one vector and the f32 score chain with a lane per head. Softmax with a
// lane per head, each lane its own sequential max / sum over the keys. V: per block of keys their
// weights c = pw * v_scale first, then per kv head and chunk of 16 elements one or two query heads
// share each key's converted codes; each output element its own chain over the keys in visiting
// order (resumed from o between key blocks). Heads beyond a multiple of 4 run the same float
// operations one at a time.
#include <wasm_simd128.h>

#include <algorithm>

#include "kernels/attention_i8.h"
#include "kernels/lane_algorithms.h"
#include "kernels/wasm/kernels_wasm.h"
#include "kernels/wasm/simd128_common.h"

namespace needle::kernels {

namespace {

using simd128::Load;
using simd128::ReduceLanes4;
using simd128::Store;
using simd128::WidenSplit;

constexpr size_t kHeadLanes = 4;
constexpr size_t kChunk = 16;                               // V: elements per tile
constexpr size_t kKeyBlock = 32;                            // V: keys per staged weight block
constexpr size_t kMaxCodes = kAttendMaxRow * kAttendBlock;  // heads * head_dim bound
static_assert(kAttendBlock % kChunk == 0);

inline int32_t SumLanes(v128_t v) {
  return wasm_i32x4_extract_lane(v, 0) + wasm_i32x4_extract_lane(v, 1) +
         wasm_i32x4_extract_lane(v, 2) + wasm_i32x4_extract_lane(v, 3);
}

// One key: dots[h * nb + b] = 256 * (query h . key block b of kv head h / group), as 4 partial
// int32 lanes (each block's codes split once, shared by the kv head's query heads).
void KeyDots(const int16_t* qs, const int8_t* key, size_t kv_heads, size_t group, size_t nb,
             size_t hd, v128_t* dots) {
  const v128_t high = wasm_i16x8_splat(static_cast<int16_t>(0xff00));
  for (size_t g = 0; g < kv_heads; ++g) {
    for (size_t b = 0; b < nb; ++b) {
      const int8_t* kb = key + g * hd + b * kAttendBlock;
      v128_t even[4], odd[4];
      for (size_t j = 0; j < 4; ++j) {
        const v128_t w = Load(kb + 16 * j);
        even[j] = wasm_i16x8_shl(w, 8);
        odd[j] = wasm_v128_and(w, high);
      }
      for (size_t h = g * group; h < (g + 1) * group; ++h) {
        const int16_t* qb = qs + h * hd + b * kAttendBlock;
        v128_t acc = wasm_i32x4_dot_i16x8(even[0], Load(qb));
        acc = wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(odd[0], Load(qb + 8)));
        for (size_t j = 1; j < 4; ++j) {
          acc = wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(even[j], Load(qb + 16 * j)));
          acc = wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(odd[j], Load(qb + 16 * j + 8)));
        }
        dots[h * nb + b] = acc;
      }
    }
  }
}

// 16 int8 codes -> four f32 vectors, exactly, without an int -> float conversion (LLVM fuses one
// after a widening into a narrow sitofp that the wasm backend scalarizes): each code, sign-extended
// to int16 and offset by 2^15, becomes the low mantissa bits of 2^23, from which 2^23 + 2^15 is
// subtracted (exact: both are integers below 2^24).
inline void CodesToFloat(const int8_t* p, v128_t* x) {
  const v128_t offset = wasm_i16x8_splat(static_cast<int16_t>(0x8000));
  const v128_t exponent = wasm_i16x8_splat(0x4b00);  // high half of 2^23's bits
  const v128_t base = wasm_f32x4_splat(8421376.0f);  // 2^23 + 2^15
  for (size_t h = 0; h < 2; ++h) {
    const v128_t c = wasm_v128_xor(wasm_i16x8_load8x8(p + 8 * h), offset);
    x[2 * h] = wasm_f32x4_sub(wasm_i16x8_shuffle(c, exponent, 0, 8, 1, 9, 2, 10, 3, 11), base);
    x[2 * h + 1] =
        wasm_f32x4_sub(wasm_i16x8_shuffle(c, exponent, 4, 12, 5, 13, 6, 14, 7, 15), base);
  }
}

// One tile of V: NT query heads (h0 ..) of one kv head, output elements [j0, j0 + 16) of block b,
// keys [0, n) of a key block: acc_tj = c * (float)v_j + acc_tj in key order, c = cw[i * ldc + t]
// (the staged pw * v_scale of head h0 + t); the chains start from 0 (first key block) or from o.
template <size_t NT>
void VTile(const float* cw, size_t ldc, const uint32_t* slots, size_t n, const int8_t* v,
           size_t kv_dim, bool resume, float* o, size_t head_dim) {
  v128_t acc[NT][4];
  for (size_t t = 0; t < NT; ++t)
    for (size_t k = 0; k < 4; ++k)
      acc[t][k] = resume ? Load(o + t * head_dim + 4 * k) : wasm_f32x4_splat(0.f);
  for (size_t i = 0; i < n; ++i) {
    v128_t x[4];
    CodesToFloat(v + slots[i] * kv_dim, x);
    for (size_t t = 0; t < NT; ++t) {
      const v128_t c = wasm_v128_load32_splat(cw + i * ldc + t);
      for (size_t k = 0; k < 4; ++k) acc[t][k] = wasm_f32x4_add(wasm_f32x4_mul(c, x[k]), acc[t][k]);
    }
  }
  for (size_t t = 0; t < NT; ++t)
    for (size_t k = 0; k < 4; ++k) Store(o + t * head_dim + 4 * k, acc[t][k]);
}

}  // namespace

void AttendI8Simd128(const I8Queries& q, const I8KvView& kv, const uint32_t* slots, size_t count,
                     AttendExpfFn expf_array, float* scores, float* o) {
  const size_t H = q.heads, hd = kv.head_dim, kvd = kv.Row();  // slot stride
  const size_t group = H / kv.kv_heads, nb = hd / kAttendBlock, kvb = kvd / kAttendBlock;
  if (H * nb > kAttendMaxRow) {
    AttendI8Reference(q, kv, slots, count, expf_array, scores, o);
    return;
  }
  // Split query codes, one key's block dots and one key block's V weights (H * nb <=
  // kAttendMaxRow); single-threaded callers only in a wasm module, but thread_local keeps
  // concurrent sessions apart should threads ever come.
  static thread_local int16_t qs[kMaxCodes];
  static thread_local v128_t dots[kAttendMaxRow];
  static thread_local float cw[kKeyBlock * kAttendMaxRow];
  WidenSplit(q.q, H * hd, qs);
  const size_t H4 = H / kHeadLanes * kHeadLanes;

  // 1. Scores, key-major [count, H]: acc = 0; acc = (float)I_b * ks_b + acc; s = acc * qse.
  for (size_t i = 0; i < count; ++i) {
    const size_t slot = slots[i];
    KeyDots(qs, kv.k + slot * kvd, kv.kv_heads, group, nb, hd, dots);
    const float* ks = kv.k_scale + slot * kvb;
    float* srow = scores + i * H;
    for (size_t h = 0; h < H4; h += kHeadLanes) {
      v128_t acc = wasm_f32x4_splat(0.f);
      for (size_t b = 0; b < nb; ++b) {
        const v128_t* d = dots + h * nb + b;
        const v128_t dot = wasm_f32x4_convert_i32x4(
            wasm_i32x4_shr(ReduceLanes4(d[0], d[nb], d[2 * nb], d[3 * nb]), 8));
        const v128_t s =
            wasm_f32x4_make(ks[h / group * nb + b], ks[(h + 1) / group * nb + b],
                            ks[(h + 2) / group * nb + b], ks[(h + 3) / group * nb + b]);
        acc = wasm_f32x4_add(wasm_f32x4_mul(dot, s), acc);
      }
      Store(srow + h, wasm_f32x4_mul(acc, Load(q.qse + h)));
    }
    for (size_t h = H4; h < H; ++h) {
      float acc = 0.f;
      for (size_t b = 0; b < nb; ++b)
        acc = static_cast<float>(SumLanes(dots[h * nb + b]) >> 8) * ks[h / group * nb + b] + acc;
      srow[h] = acc * q.qse[h];
    }
  }

  // 2. Softmax per head (a lane per head): kernels/lane_algorithms.h.
  SoftmaxHeadsLanes<simd128::F32x4>(scores, count, H, expf_array);

  // 3. V, per block of keys: their weights cw[i][b][h] = pw * v_scale (the reference's c), then
  // per kv head, chunk of head_dim and pair of its query heads.
  const size_t ldc = nb * H;
  for (size_t i0 = 0; i0 < count; i0 += kKeyBlock) {
    const size_t n = std::min(kKeyBlock, count - i0);
    for (size_t i = 0; i < n; ++i) {
      const float* pw = scores + (i0 + i) * H;
      const float* vs = kv.v_scale + slots[i0 + i] * kvb;
      for (size_t b = 0; b < nb; ++b)
        for (size_t h = 0; h < H; ++h) cw[i * ldc + b * H + h] = pw[h] * vs[h / group * nb + b];
    }
    for (size_t g = 0; g < kv.kv_heads; ++g) {
      for (size_t j0 = 0; j0 < hd; j0 += kChunk) {
        const int8_t* v = kv.v + g * hd + j0;
        const float* c = cw + j0 / kAttendBlock * H;
        for (size_t h = g * group; h < (g + 1) * group;) {
          float* oh = o + h * hd + j0;
          if ((g + 1) * group - h >= 2) {
            VTile<2>(c + h, ldc, slots + i0, n, v, kvd, i0 > 0, oh, hd);
            h += 2;
          } else {
            VTile<1>(c + h, ldc, slots + i0, n, v, kvd, i0 > 0, oh, hd);
            h += 1;
          }
        }
      }
    }
  }
}

}  // namespace needle::kernels
