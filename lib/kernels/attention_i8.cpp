// Scalar reference of the int8 attention kernel (attention_i8.h): the float order of the contract,
// written plainly. Bit-exact code: built with -ffp-contract=off.
#include "kernels/attention_i8.h"

#include <algorithm>

#include "kernels/libm.h"

namespace needle::kernels {

void AttendExpfScalar(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = libm::Expf(x[i]);
}

void AttendI8Reference(const I8Queries& q, const I8KvView& kv, const uint32_t* slots, size_t count,
                       AttendExpfFn expf_array, float* scores, float* o) {
  const size_t H = q.heads, hd = kv.head_dim, kvd = kv.Row();  // slot stride
  const size_t group = H / kv.kv_heads, nb = hd / kAttendBlock, kvb = kvd / kAttendBlock;
  // Scores, key-major [count, H].
  for (size_t i = 0; i < count; ++i) {
    const size_t slot = slots[i];
    for (size_t h = 0; h < H; ++h) {
      const size_t g = h / group;
      const int8_t* qh = q.q + h * hd;
      const int8_t* kh = kv.k + slot * kvd + g * hd;
      const float* ks = kv.k_scale + slot * kvb + g * nb;
      float acc = 0.f;
      for (size_t b = 0; b < nb; ++b) {
        int32_t dot = 0;
        for (size_t j = b * kAttendBlock; j < (b + 1) * kAttendBlock; ++j)
          dot += int32_t{qh[j]} * int32_t{kh[j]};
        acc = static_cast<float>(dot) * ks[b] + acc;
      }
      scores[i * H + h] = acc * q.qse[h];
    }
  }
  // Softmax per head: max, exps, sequential sum, weights e_i * invs (kept in scores).
  for (size_t h = 0; h < H; ++h) {
    float m = kAttendNegInit;
    for (size_t i = 0; i < count; ++i)
      if (m < scores[i * H + h]) m = scores[i * H + h];
    for (size_t i = 0; i < count; ++i) scores[i * H + h] = scores[i * H + h] - m;
  }
  expf_array(scores, scores, count * H);
  for (size_t h = 0; h < H; ++h) {
    float sum = 0.f;
    for (size_t i = 0; i < count; ++i) sum = sum + scores[i * H + h];
    const float invs = 1.0f / sum;
    for (size_t i = 0; i < count; ++i) scores[i * H + h] = scores[i * H + h] * invs;
  }
  // V: o_j accumulated over the keys in visiting order.
  for (size_t h = 0; h < H; ++h) {
    const size_t g = h / group;
    float* oh = o + h * hd;
    for (size_t j = 0; j < hd; ++j) oh[j] = 0.f;
    for (size_t i = 0; i < count; ++i) {
      const size_t slot = slots[i];
      const float pw = scores[i * H + h];
      const int8_t* vh = kv.v + slot * kvd + g * hd;
      const float* vs = kv.v_scale + slot * kvb + g * nb;
      for (size_t b = 0; b < nb; ++b) {
        const float c = pw * vs[b];
        for (size_t j = b * kAttendBlock; j < (b + 1) * kAttendBlock; ++j)
          oh[j] = c * static_cast<float>(vh[j]) + oh[j];
      }
    }
  }
}

size_t AttendI8BlockScratchBytes(const I8QueryBlock& q, const I8KvView& kv) {
  size_t max_count = 0;
  for (size_t t = 0; t < q.tokens; ++t) max_count = std::max(max_count, q.counts[t]);
  const size_t hd = kv.head_dim, nb = hd / kAttendBlock;
  const size_t group = kv.kv_heads ? q.heads / kv.kv_heads : 0;
  // The reference: one token's key-major scores.
  const size_t reference = max_count * q.heads * sizeof(float);
  // The vector kernels, per kv head: rows = tokens * group padded to 16 lanes; transposed codes
  // and their bias per block, the rows' scales and counts, the weights per block (the first
  // block's area holding the exps before), the converted values; each area 64-byte aligned (plus
  // the base's alignment).
  const size_t rows = (q.tokens * group + 15) / 16 * 16;
  auto area = [](size_t bytes) { return (bytes + 63) / 64 * 64; };
  const size_t block = 64 + area(nb * 16 * rows * 4) + area(nb * rows * 4) + 2 * area(rows * 4) +
                       area(nb * max_count * rows * 4) + area(max_count * hd * 4);
  return std::max(reference, block);
}

void AttendI8BlockReference(const I8QueryBlock& q, const I8KvView& kv, const uint32_t* slots,
                            AttendExpfFn expf_array, void* scratch, float* o) {
  const size_t row = q.heads * kv.head_dim;
  for (size_t t = 0; t < q.tokens; ++t) {
    const I8Queries one{q.q + t * row, q.qse + t * q.heads, q.heads};
    AttendI8Reference(one, kv, slots, q.counts[t], expf_array, static_cast<float*>(scratch),
                      o + t * row);
  }
}

}  // namespace needle::kernels
