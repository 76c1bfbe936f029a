// Helpers shared by the WebAssembly SIMD128 kernels (lib/kernels/wasm/): vector loads, the
// engine's int8 rounding, int16 staging of int8 codes for i32x4.dot_i16x8_s, lane reductions and
// the in-vector WHT stages. Each one is exact (it performs the scalar reference's float operations
// lane by lane, or integer operations whose results fit). wasm builds only.
#pragma once

#include <wasm_simd128.h>

#include <cstddef>
#include <cstdint>

namespace needle::kernels::simd128 {

inline v128_t Load(const void* p) { return wasm_v128_load(p); }
inline void Store(void* p, v128_t v) { wasm_v128_store(p, v); }

// The reference's int8 of x: low byte of (int32)roundf(x) (half away from zero), 0 unless
// |x| < 2^31 (NaN, infinities and huge values). x - trunc(x) is exact.
inline v128_t RoundToI32(v128_t x) {
  const v128_t t = wasm_f32x4_trunc(x);
  const v128_t fraction = wasm_f32x4_sub(x, t);
  v128_t i = wasm_i32x4_trunc_sat_f32x4(x);
  i = wasm_i32x4_sub(i, wasm_f32x4_ge(fraction, wasm_f32x4_splat(0.5f)));   // mask -1: + 1
  i = wasm_i32x4_add(i, wasm_f32x4_le(fraction, wasm_f32x4_splat(-0.5f)));  // mask -1: - 1
  return wasm_v128_and(i, wasm_f32x4_lt(wasm_f32x4_abs(x), wasm_f32x4_splat(0x1p31f)));
}

// Low bytes of 16 int32 (four vectors) in order.
inline v128_t LowBytes16(v128_t a, v128_t b, v128_t c, v128_t d) {
  const v128_t mask = wasm_i32x4_splat(0xff);
  const v128_t ab = wasm_u16x8_narrow_i32x4(wasm_v128_and(a, mask), wasm_v128_and(b, mask));
  const v128_t cd = wasm_u16x8_narrow_i32x4(wasm_v128_and(c, mask), wasm_v128_and(d, mask));
  return wasm_u8x16_narrow_i16x8(ab, cd);
}

// max over the lanes (pmax: a NaN never replaces the running value, as std::max(amax, x)).
inline float MaxLanes(v128_t m) {
  m = wasm_f32x4_pmax(m, wasm_i32x4_shuffle(m, m, 2, 3, 0, 1));
  m = wasm_f32x4_pmax(m, wasm_i32x4_shuffle(m, m, 1, 0, 3, 2));
  return wasm_f32x4_extract_lane(m, 0);
}

// Lane r of the result = the sum of the four int32 lanes of v[r].
inline v128_t ReduceLanes4(v128_t v0, v128_t v1, v128_t v2, v128_t v3) {
  const v128_t s01 = wasm_i32x4_add(wasm_i32x4_shuffle(v0, v1, 0, 4, 1, 5),
                                    wasm_i32x4_shuffle(v0, v1, 2, 6, 3, 7));
  const v128_t s23 = wasm_i32x4_add(wasm_i32x4_shuffle(v2, v3, 0, 4, 1, 5),
                                    wasm_i32x4_shuffle(v2, v3, 2, 6, 3, 7));
  return wasm_i32x4_add(wasm_i32x4_shuffle(s01, s23, 0, 1, 4, 5),
                        wasm_i32x4_shuffle(s01, s23, 2, 3, 6, 7));
}

// n int8 (a multiple of 16) -> int16, each 16-code block as its 8 even positions, then its 8 odd
// ones: the order SplitDot reads its second operand in.
inline void WidenSplit(const int8_t* q, size_t n, int16_t* out) {
  for (size_t i = 0; i < n; i += 16) {
    const v128_t x = Load(q + i);
    Store(out + i, wasm_i16x8_shr(wasm_i16x8_shl(x, 8), 8));
    Store(out + i + 8, wasm_i16x8_shr(x, 8));
  }
}

// acc + 256 * (16 int8 codes w . their partners at a, as WidenSplit stores them): w read as int16
// lanes, the even byte shifted into the high half and the odd byte masked in place, so each lane
// is its code times 256, exactly (no sign extension needed). The caller keeps the sum below 2^31
// (a 128-code dot of int8 values is below 2^29 after the factor) and shifts it back by 8.
__attribute__((always_inline)) inline v128_t SplitDot(v128_t acc, v128_t w, const int16_t* a) {
  const v128_t high = wasm_i16x8_splat(static_cast<int16_t>(0xff00));
  acc = wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(wasm_i16x8_shl(w, 8), Load(a)));
  return wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(wasm_v128_and(w, high), Load(a + 8)));
}

// The SIMD128 float-vector policy of kernels/lane_algorithms.h (4 lanes).
struct F32x4 {
  using T = v128_t;
  static constexpr size_t kLanes = 4;
  static T Load(const float* p) { return wasm_v128_load(p); }
  static void Store(float* p, T v) { wasm_v128_store(p, v); }
  static T Splat(float f) { return wasm_f32x4_splat(f); }
  static T Add(T a, T b) { return wasm_f32x4_add(a, b); }
  static T Sub(T a, T b) { return wasm_f32x4_sub(a, b); }
  static T Mul(T a, T b) { return wasm_f32x4_mul(a, b); }
  static T Div(T a, T b) { return wasm_f32x4_div(a, b); }
  static T Abs(T v) { return wasm_f32x4_abs(v); }
  static T MaxKeep(T m, T x) { return wasm_f32x4_pmax(m, x); }  // pmax: m < x ? x : m
  static float MaxLanes(T v) { return simd128::MaxLanes(v); }
  // Butterfly stages h = 1, 2 inside one vector: lanes with bit h set take partner - self (the
  // reference's a - c with a = x[i - h]), the others self + partner.
  static T InVectorStages(T v) {
    T partner = wasm_i32x4_shuffle(v, v, 1, 0, 3, 2);
    v = wasm_i32x4_shuffle(wasm_f32x4_add(v, partner), wasm_f32x4_sub(partner, v), 0, 5, 2, 7);
    partner = wasm_i32x4_shuffle(v, v, 2, 3, 0, 1);
    return wasm_i32x4_shuffle(wasm_f32x4_add(v, partner), wasm_f32x4_sub(partner, v), 0, 1, 6, 7);
  }
};

}  // namespace needle::kernels::simd128
