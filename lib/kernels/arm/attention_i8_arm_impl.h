// The AArch64 driver of the int8 attention kernel (attention_i8.h), written once and compiled in
// two translation units: attention_i8_neon.cpp (SMULL / SMLAL / SADALP dots) and
// attention_i8_dotprod.cpp (SDOT, -march=armv8.2-a+dotprod). Internal linkage: the copies never
// meet at link time. Bit-exact with the scalar reference; built with -ffp-contract=off.
//
// Scores: per key and head, the int32 dot of each 64-block (exact, any order) and the reference's
// f32 chain over the blocks. Softmax: key-major scores [count, heads], a lane per head (4 heads
// per vector), each lane its own sequential max (compare and select, as the reference's
// `if (m < s) m = s`) and sum over the keys. V: per kv head, 64-block and 16-element chunk, up to
// 4 query heads of the group share each key's converted codes; every output element its own chain
// over the keys in visiting order.
#pragma once

#include <arm_neon.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/arm/kernels_arm.h"
#include "kernels/arm/neon_common.h"
#include "kernels/attention_i8.h"
#include "kernels/lane_algorithms.h"

namespace needle::kernels {
namespace {  // NOLINT(cert-dcl59-cpp, google-build-namespaces): one private copy per ISA file

// Exact int32 dot of 64 codes in [-127, 127].
inline int32_t Dot64(const int8_t* a, const int8_t* b) {
  int8x16_t x[4], z[4];
  for (size_t i = 0; i < 4; ++i) {
    x[i] = vld1q_s8(a + 16 * i);
    z[i] = vld1q_s8(b + 16 * i);
  }
#if defined(__ARM_FEATURE_DOTPROD)
  int32x4_t acc = vdotq_s32(vdupq_n_s32(0), x[0], z[0]);
  for (size_t i = 1; i < 4; ++i) acc = vdotq_s32(acc, x[i], z[i]);
#else
  int32x4_t acc = vdupq_n_s32(0);
  for (size_t i = 0; i < 4; i += 2) {  // two products per int16 lane: 2 * 127 * 127 fits
    int16x8_t lo = vmull_s8(vget_low_s8(x[i]), vget_low_s8(z[i]));
    lo = vmlal_s8(lo, vget_low_s8(x[i + 1]), vget_low_s8(z[i + 1]));
    int16x8_t hi = vmull_high_s8(x[i], z[i]);
    hi = vmlal_high_s8(hi, x[i + 1], z[i + 1]);
    acc = vpadalq_s16(acc, lo);
    acc = vpadalq_s16(acc, hi);
  }
#endif
  return vaddvq_s32(acc);
}

// 16 int8 codes -> 4 float vectors (exact).
inline void Codes16(const int8_t* p, float32x4_t* out) {
  const int8x16_t c = vld1q_s8(p);
  const int16x8_t lo = vmovl_s8(vget_low_s8(c)), hi = vmovl_high_s8(c);
  out[0] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo)));
  out[1] = vcvtq_f32_s32(vmovl_high_s16(lo));
  out[2] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi)));
  out[3] = vcvtq_f32_s32(vmovl_high_s16(hi));
}

// V for NT query heads h0.. of kv head g, elements [j0, j0 + 16) of block b = j0 / 64:
// acc_tj = c * (float)v_j + acc_tj over the keys in order, c = pw_{i,h} * vs_{p,g,b}.
template <size_t NT>
void VChunk(const float* pw, size_t heads, size_t h0, const uint32_t* slots, size_t count,
            const I8KvView& kv, size_t g, size_t j0, float* o) {
  const size_t hd = kv.head_dim, kvd = kv.Row(), kvb = kvd / kAttendBlock;  // slot strides
  const size_t scale_index = g * (hd / kAttendBlock) + j0 / kAttendBlock;
  float32x4_t acc[NT][4];
  for (size_t t = 0; t < NT; ++t)
    for (size_t k = 0; k < 4; ++k) acc[t][k] = vdupq_n_f32(0.f);
  for (size_t i = 0; i < count; ++i) {
    const size_t slot = slots[i];
    float32x4_t x[4];
    Codes16(kv.v + slot * kvd + g * hd + j0, x);
    const float vs = kv.v_scale[slot * kvb + scale_index];
    for (size_t t = 0; t < NT; ++t) {
      const float c = pw[i * heads + h0 + t] * vs;
      for (size_t k = 0; k < 4; ++k) acc[t][k] = vaddq_f32(vmulq_n_f32(x[k], c), acc[t][k]);
    }
  }
  for (size_t t = 0; t < NT; ++t)
    for (size_t k = 0; k < 4; ++k) vst1q_f32(o + (h0 + t) * hd + j0 + 4 * k, acc[t][k]);
}

void AttendArm(const I8Queries& q, const I8KvView& kv, const uint32_t* slots, size_t count,
               AttendExpfFn expf_array, float* scores, float* o) {
  const size_t H = q.heads, hd = kv.head_dim, kvd = kv.Row();  // slot stride
  if (hd == 0 || hd % kAttendBlock != 0 || kv.kv_heads == 0 || H % kv.kv_heads != 0)
    return AttendI8Reference(q, kv, slots, count, expf_array, scores, o);
  const size_t group = H / kv.kv_heads, nb = hd / kAttendBlock, kvb = kvd / kAttendBlock;
  // Scores, key-major [count, H]. The ring is read through the slot list: the key and value rows
  // of the key 8 ahead are prefetched (the value rows for the V passes below, one per kv head),
  // as on x86. A hint only: the results do not change.
  constexpr size_t kPrefetchKeys = 8;
  for (size_t i = 0; i < count; ++i) {
    const size_t slot = slots[i];
    if (i + kPrefetchKeys < count) {
      const size_t next = slots[i + kPrefetchKeys];
      for (size_t off = 0; off < kv.kv_heads * hd; off += 64) {
        __builtin_prefetch(kv.k + next * kvd + off, 0, 3);
        __builtin_prefetch(kv.v + next * kvd + off, 0, 3);
      }
    }
    for (size_t h = 0; h < H; ++h) {
      const size_t g = h / group;
      const int8_t* qh = q.q + h * hd;
      const int8_t* kh = kv.k + slot * kvd + g * hd;
      const float* ks = kv.k_scale + slot * kvb + g * nb;
      float acc = 0.f;
      for (size_t b = 0; b < nb; ++b)
        acc = static_cast<float>(Dot64(qh + b * kAttendBlock, kh + b * kAttendBlock)) * ks[b] + acc;
      scores[i * H + h] = acc * q.qse[h];
    }
  }
  // Softmax: 4 heads per vector, then the remaining heads one at a time (lane_algorithms.h).
  SoftmaxHeadsLanes<F32x4Neon>(scores, count, H, expf_array);
  // V: per kv head, 16-element chunk and tile of up to 4 of its query heads.
  for (size_t g = 0; g < kv.kv_heads; ++g)
    for (size_t j0 = 0; j0 < hd; j0 += 16)
      for (size_t h0 = g * group; h0 < (g + 1) * group;) {
        const size_t left = (g + 1) * group - h0;
        if (left >= 4) {
          VChunk<4>(scores, H, h0, slots, count, kv, g, j0, o);
          h0 += 4;
        } else if (left >= 2) {
          VChunk<2>(scores, H, h0, slots, count, kv, g, j0, o);
          h0 += 2;
        } else {
          VChunk<1>(scores, H, h0, slots, count, kv, g, j0, o);
          h0 += 1;
        }
      }
}

}  // namespace
}  // namespace needle::kernels
