// Float algorithms written once over a vector policy V and instantiated by each ISA family in its
// own translation units (its own flags): the FWHT, the int8 quantizer's 128-group transform and the
// attention softmax. They are ISA-free; a policy supplies the vector type and the operations:
//   T, kLanes              the vector type and its float lanes (a power of two, <= 16)
//   Load(p), Store(p, v)   unaligned loads / stores of kLanes floats
//   Splat, Add, Sub, Mul,  lane-wise IEEE operations (no fused multiply-add)
//   Div
//   Abs(v)                 |v| (clears the sign bit)
//   MaxKeep(m, x)          per lane m < x ? x : m: the scalar `if (m < x) m = x`, which keeps m
//                          when x is NaN (as std::max(m, x))
//   MaxLanes(v)            the largest lane (v free of NaN)
//   InVectorStages(v)      the WHT butterfly stages h = 1 .. kLanes / 2 inside one vector: lanes
//                          with bit h set take partner - self, the others self + partner
// Each performs the scalar reference's float operations element by element in the reference's
// order (kernels/fwht.cpp, cq_int8.cpp, attention_i8.cpp), so every instantiation gives the
// reference's bits; the kernel tests hold each ISA to that. Build with -ffp-contract=off.
// Internal linkage: each ISA's copy stays in its own translation unit.
#pragma once

#include <cmath>
#include <cstddef>

#include "kernels/attention_i8.h"
#include "kernels/cq_int8.h"
#include "kernels/fwht.h"

namespace needle::kernels {
namespace {  // NOLINT(cert-dcl59-cpp, google-build-namespaces): one private copy per ISA file

// In-place FWHT of n floats (n a power of two >= V::kLanes): the butterflies stage by stage, with
// `normalize` the final scaling by FwhtScale(n) folded into the last stage (the same products).
template <class V>
void FwhtLanes(float* x, size_t n, bool normalize) {
  using T = typename V::T;
  constexpr size_t L = V::kLanes;
  const T scale = V::Splat(FwhtScale(n));
  if (n == kI8Group) {
    // The CQ group size: the whole transform in registers, the same butterflies in the same
    // pairs, then the scaling (the products the last stage would form).
    constexpr size_t kVectors = kI8Group / L;
    T v[kVectors];
    for (size_t i = 0; i < kVectors; ++i) v[i] = V::InVectorStages(V::Load(x + L * i));
    for (size_t h = 1; h < kVectors; h *= 2)
      for (size_t b = 0; b < kVectors; b += 2 * h)
        for (size_t j = b; j < b + h; ++j) {
          const T lo = v[j], hi = v[j + h];
          v[j] = V::Add(lo, hi);
          v[j + h] = V::Sub(lo, hi);
        }
    for (size_t i = 0; i < kVectors; ++i)
      V::Store(x + L * i, normalize ? V::Mul(v[i], scale) : v[i]);
    return;
  }
  for (size_t i = 0; i < n; i += L) {
    const T v = V::InVectorStages(V::Load(x + i));
    V::Store(x + i, normalize && n == L ? V::Mul(v, scale) : v);
  }
  for (size_t h = L; h < n; h *= 2) {
    const bool last = normalize && 2 * h == n;
    for (size_t block = 0; block < n; block += 2 * h) {
      for (size_t i = block; i < block + h; i += L) {
        const T a = V::Load(x + i), b = V::Load(x + i + h);
        T sum = V::Add(a, b), diff = V::Sub(a, b);
        if (last) {
          sum = V::Mul(sum, scale);
          diff = V::Mul(diff, scale);
        }
        V::Store(x + i, sum);
        V::Store(x + i + h, diff);
      }
    }
  }
}

// The activation quantizer's transform of one 128-group (NUMERICS.md §2, cq_int8.h): v[] <- the
// unnormalized WHT of src[0, 128) times c128 = 1 / sqrt(128), in kI8Group / kLanes vectors in
// column order; returns max |v| (NaN lanes skipped, as the reference's std::max).
template <class V>
float GroupWhtLanes(const float* src, typename V::T* v) {
  using T = typename V::T;
  constexpr size_t kVectors = kI8Group / V::kLanes;
  for (size_t i = 0; i < kVectors; ++i) v[i] = V::InVectorStages(V::Load(src + V::kLanes * i));
  for (size_t h = 1; h < kVectors; h *= 2)  // stages kLanes .. 64: vectors j and j + h
    for (size_t b = 0; b < kVectors; b += 2 * h)
      for (size_t j = b; j < b + h; ++j) {
        const T lo = v[j], hi = v[j + h];
        v[j] = V::Add(lo, hi);
        v[j + h] = V::Sub(lo, hi);
      }
  const T c = V::Splat(1.0f / std::sqrt(static_cast<float>(kI8Group)));
  T amax = V::Splat(0.f);
  for (size_t i = 0; i < kVectors; ++i) {
    v[i] = V::Mul(c, v[i]);
    amax = V::MaxKeep(amax, V::Abs(v[i]));
  }
  return V::MaxLanes(amax);
}

// The activation quantizer (cq_int8.h CqQuantizeI8): per token and 128-group, the transform
// (GroupWhtLanes), the scale s = amax / 127 (1 when amax is 0) into scales, then
// emit(v, 1 / s, dst): the family's rounding of v * (1 / s) and its code layout at dst.
template <class V, class Emit>
void QuantizeGroupsLanes(const float* x, size_t n, size_t cols, size_t ldx, size_t in_pad,
                         int8_t* q, float* scales, Emit emit) {
  const size_t groups = in_pad / kI8Group;
  alignas(64) float padded[kI8Group];
  for (size_t t = 0; t < n; ++t) {
    for (size_t g = 0; g < groups; ++g) {
      typename V::T v[kI8Group / V::kLanes];
      const float m = GroupWhtLanes<V>(I8GroupInput(x + t * ldx, cols, g, padded), v);
      const float s = m > 0.f ? m / 127.0f : 1.0f;
      scales[t * groups + g] = s;
      emit(v, 1.0f / s, q + t * in_pad + g * kI8Group);
    }
  }
}

// The attention softmax over key-major scores [count, H] (attention_i8.h), a lane per head: per
// head the running max from kAttendNegInit, s - max, the exps (expf_array over the whole block),
// the sequential sum, and each e times 1 / sum. Heads beyond a multiple of kLanes run the same
// operations one at a time.
template <class V>
void SoftmaxHeadsLanes(float* scores, size_t count, size_t H, AttendExpfFn expf_array) {
  using T = typename V::T;
  constexpr size_t L = V::kLanes;
  const size_t Hv = H / L * L;
  for (size_t h = 0; h < Hv; h += L) {
    T m = V::Splat(kAttendNegInit);
    for (size_t i = 0; i < count; ++i) m = V::MaxKeep(m, V::Load(scores + i * H + h));
    for (size_t i = 0; i < count; ++i)
      V::Store(scores + i * H + h, V::Sub(V::Load(scores + i * H + h), m));
  }
  for (size_t h = Hv; h < H; ++h) {
    float m = kAttendNegInit;
    for (size_t i = 0; i < count; ++i)
      if (m < scores[i * H + h]) m = scores[i * H + h];
    for (size_t i = 0; i < count; ++i) scores[i * H + h] = scores[i * H + h] - m;
  }
  expf_array(scores, scores, count * H);
  for (size_t h = 0; h < Hv; h += L) {
    T sum = V::Splat(0.f);
    for (size_t i = 0; i < count; ++i) sum = V::Add(sum, V::Load(scores + i * H + h));
    const T invs = V::Div(V::Splat(1.0f), sum);
    for (size_t i = 0; i < count; ++i)
      V::Store(scores + i * H + h, V::Mul(V::Load(scores + i * H + h), invs));
  }
  for (size_t h = Hv; h < H; ++h) {
    float sum = 0.f;
    for (size_t i = 0; i < count; ++i) sum = sum + scores[i * H + h];
    const float invs = 1.0f / sum;
    for (size_t i = 0; i < count; ++i) scores[i * H + h] = scores[i * H + h] * invs;
  }
}

// The Sinkhorn of one 4 x 4 matrix (vmath.h: SinkhornArrays' operations per line) on a 4-lane
// policy: v[k] holds row k; the row phase transposes first so that every line is a lane and its
// elements are v[0..3] (the column phase needs no transpose). kExpf / kLogf are the family's
// libm ports on a vector, kTranspose its in-place 4 x 4 transpose.
template <class V, typename V::T (*kExpf)(typename V::T), typename V::T (*kLogf)(typename V::T),
          void (*kTranspose)(typename V::T*)>
void Sinkhorn4Lanes(float* P, int rounds) {
  using T = typename V::T;
  static_assert(V::kLanes == 4, "one lane per line of a 4 x 4 matrix");
  auto phase = [](T* v) {
    T m = V::Splat(-1e30f);
    for (size_t k = 0; k < 4; ++k) m = V::MaxKeep(m, v[k]);
    T e[4];
    for (size_t k = 0; k < 4; ++k) e[k] = kExpf(V::Sub(v[k], m));
    const T s = V::Add(V::Add(V::Add(e[0], e[1]), e[2]), e[3]);
    const T lse = V::Add(m, kLogf(s));
    for (size_t k = 0; k < 4; ++k) v[k] = V::Sub(v[k], lse);
  };
  T v[4];
  for (size_t k = 0; k < 4; ++k) v[k] = V::Load(P + 4 * k);
  for (int round = 0; round < rounds; ++round) {
    kTranspose(v);  // v[k] = column k: the rows' lines in lanes
    phase(v);
    kTranspose(v);  // back to rows: the columns' lines in lanes
    phase(v);
  }
  for (size_t k = 0; k < 4; ++k) V::Store(P + 4 * k, kExpf(v[k]));
}

}  // namespace
}  // namespace needle::kernels
