// WebAssembly SIMD128 versions of the array kernels of kernels/vmath.h: expf / logf on 4 floats per
// step (two f64x2 vectors running libm.cpp's double operations in its order; wasm has no fused
// multiply-add; table entries loaded lane by lane) and the int8 quantizer (the reference's f32
// product and exact rounding per element). Lanes with special inputs (|x| >= 88 for expf;
// subnormal, zero, negative, inf or NaN for logf) take the scalar port's result. Bit-exact with
// the scalar references (tests/vmath_test.cpp).
#include <wasm_simd128.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "kernels/lane_algorithms.h"
#include "kernels/libm.h"
#include "kernels/vmath.h"
#include "kernels/wasm/kernels_wasm.h"
#include "kernels/wasm/simd128_common.h"

namespace needle::kernels {

namespace {

namespace c = vmath_internal;
using simd128::Load;
using simd128::LowBytes16;
using simd128::MaxLanes;
using simd128::RoundToI32;
using simd128::Store;

constexpr size_t kLanes = 4;

// Two 64-bit table entries picked by the lanes of idx.
inline v128_t Lookup2(const uint64_t* table, v128_t idx) {
  return wasm_u64x2_make(table[wasm_i64x2_extract_lane(idx, 0)],
                         table[wasm_i64x2_extract_lane(idx, 1)]);
}

inline v128_t Lookup2(const double* table, uint32_t i0, uint32_t i1) {
  return wasm_f64x2_make(table[i0], table[i1]);
}

// libm::Expf's main path on 2 lanes (f64x2 from the low f32 lanes of x; result in the low lanes).
inline v128_t ExpCore(v128_t x) {
  const v128_t shift = wasm_f64x2_splat(c::kExpShift);
  const v128_t z =
      wasm_f64x2_mul(wasm_f64x2_splat(c::kExpInvLn2N), wasm_f64x2_promote_low_f32x4(x));
  v128_t kd = wasm_f64x2_add(z, shift);
  const v128_t ki = kd;
  kd = wasm_f64x2_sub(kd, shift);
  const v128_t r = wasm_f64x2_sub(z, kd);  // x*32/ln2 = k + r
  v128_t t = Lookup2(c::kExp2Table, wasm_v128_and(ki, wasm_i64x2_splat(31)));
  t = wasm_i64x2_add(t, wasm_i64x2_shl(ki, 47));
  const v128_t s = t;  // 2^(k/32)
  const v128_t p = wasm_f64x2_add(wasm_f64x2_mul(wasm_f64x2_splat(c::kExpPoly[0]), r),
                                  wasm_f64x2_splat(c::kExpPoly[1]));
  const v128_t r2 = wasm_f64x2_mul(r, r);
  v128_t y =
      wasm_f64x2_add(wasm_f64x2_mul(wasm_f64x2_splat(c::kExpPoly[2]), r), wasm_f64x2_splat(1.0));
  y = wasm_f64x2_add(wasm_f64x2_mul(p, r2), y);
  y = wasm_f64x2_mul(y, s);
  return wasm_f32x4_demote_f64x2_zero(y);
}

inline v128_t Expf4(v128_t x) {
  const v128_t low = ExpCore(x), high = ExpCore(wasm_i64x2_shuffle(x, x, 1, 0));
  v128_t y = wasm_i64x2_shuffle(low, high, 0, 2);
  // |x| >= 88, inf or NaN (the scalar's abs_top12 >= 0x42b): the scalar function.
  const v128_t abs_bits = wasm_v128_and(x, wasm_i32x4_splat(0x7fffffff));
  if (wasm_v128_any_true(wasm_i32x4_gt(abs_bits, wasm_i32x4_splat(0x42afffff)))) {
    alignas(16) float in[kLanes], out[kLanes];
    Store(in, x);
    Store(out, y);
    for (size_t i = 0; i < kLanes; ++i)
      if ((std::bit_cast<uint32_t>(in[i]) & 0x7fffffff) > 0x42afffff) out[i] = libm::Expf(in[i]);
    y = Load(out);
  }
  return y;
}

// libm::Logf's main path on 2 lanes of bits ix (positive normal; the low two u32 lanes).
inline v128_t LogCore(v128_t ix) {
  const v128_t tmp = wasm_i32x4_sub(ix, wasm_i32x4_splat(static_cast<int32_t>(c::kLogOff)));
  const v128_t i = wasm_v128_and(wasm_u32x4_shr(tmp, 19), wasm_i32x4_splat(15));
  const v128_t k = wasm_i32x4_shr(tmp, 23);  // arithmetic
  const v128_t iz =
      wasm_i32x4_sub(ix, wasm_v128_and(tmp, wasm_i32x4_splat(static_cast<int32_t>(0xff800000u))));
  const uint32_t i0 = wasm_u32x4_extract_lane(i, 0), i1 = wasm_u32x4_extract_lane(i, 1);
  const v128_t invc = Lookup2(c::kLogInvC, i0, i1);
  const v128_t logc = Lookup2(c::kLogLogC, i0, i1);
  const v128_t z = wasm_f64x2_promote_low_f32x4(iz);
  const v128_t r = wasm_f64x2_sub(wasm_f64x2_mul(z, invc), wasm_f64x2_splat(1.0));
  const v128_t y0 = wasm_f64x2_add(
      logc, wasm_f64x2_mul(wasm_f64x2_convert_low_i32x4(k), wasm_f64x2_splat(c::kLogLn2)));
  const v128_t r2 = wasm_f64x2_mul(r, r);
  v128_t y = wasm_f64x2_add(wasm_f64x2_mul(wasm_f64x2_splat(c::kLogPoly[1]), r),
                            wasm_f64x2_splat(c::kLogPoly[2]));
  y = wasm_f64x2_add(wasm_f64x2_mul(wasm_f64x2_splat(c::kLogPoly[0]), r2), y);
  y = wasm_f64x2_add(wasm_f64x2_mul(y, r2), wasm_f64x2_add(y0, r));
  return wasm_f32x4_demote_f64x2_zero(y);
}

inline v128_t Logf4(v128_t x) {
  const v128_t low = LogCore(x), high = LogCore(wasm_i64x2_shuffle(x, x, 1, 0));
  v128_t y = wasm_i64x2_shuffle(low, high, 0, 2);
  // Subnormal, zero, negative, inf or NaN: ix - 0x00800000 >= 0x7f000000 (unsigned). x == 1 is
  // 0 on the main path too (r = 0, k = 0, log c = 0).
  const v128_t special =
      wasm_u32x4_ge(wasm_i32x4_sub(x, wasm_i32x4_splat(0x00800000)), wasm_i32x4_splat(0x7f000000));
  if (wasm_v128_any_true(special)) {
    alignas(16) float in[kLanes], out[kLanes];
    Store(in, x);
    Store(out, y);
    for (size_t i = 0; i < kLanes; ++i)
      if (std::bit_cast<uint32_t>(in[i]) - 0x00800000u >= 0x7f000000u) out[i] = libm::Logf(in[i]);
    y = Load(out);
  }
  return y;
}

// y = f(x) over n floats, 4 at a time; the tail goes through a zero-padded buffer.
template <v128_t (*kF)(v128_t)>
inline void Apply(const float* x, float* y, size_t n) {
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) Store(y + i, kF(Load(x + i)));
  if (i < n) {
    alignas(16) float buf[kLanes] = {};
    std::memcpy(buf, x + i, (n - i) * sizeof(float));
    Store(buf, kF(Load(buf)));
    std::memcpy(y + i, buf, (n - i) * sizeof(float));
  }
}

inline void Transpose4(v128_t* v) {
  const v128_t t0 = wasm_i32x4_shuffle(v[0], v[1], 0, 4, 1, 5);
  const v128_t t1 = wasm_i32x4_shuffle(v[0], v[1], 2, 6, 3, 7);
  const v128_t t2 = wasm_i32x4_shuffle(v[2], v[3], 0, 4, 1, 5);
  const v128_t t3 = wasm_i32x4_shuffle(v[2], v[3], 2, 6, 3, 7);
  v[0] = wasm_i32x4_shuffle(t0, t2, 0, 1, 4, 5);
  v[1] = wasm_i32x4_shuffle(t0, t2, 2, 3, 6, 7);
  v[2] = wasm_i32x4_shuffle(t1, t3, 0, 1, 4, 5);
  v[3] = wasm_i32x4_shuffle(t1, t3, 2, 3, 6, 7);
}

}  // namespace

void SinkhornSimd128(float* P, size_t n, size_t count, int rounds, float* scratch) {
  if (n != 4)
    return SinkhornArrays(&ExpfArraySimd128, &LogfArraySimd128, P, n, count, rounds, scratch);
  for (size_t c = 0; c < count; ++c)
    Sinkhorn4Lanes<simd128::F32x4, Expf4, Logf4, Transpose4>(P + 16 * c, rounds);
}

void ExpfArraySimd128(const float* x, float* y, size_t n) { Apply<Expf4>(x, y, n); }

void LogfArraySimd128(const float* x, float* y, size_t n) { Apply<Logf4>(x, y, n); }

float QuantizeI8Simd128(const float* v, size_t n, int8_t* q) {
  v128_t amax4 = wasm_f32x4_splat(0.f);
  size_t i = 0;
  for (; i + 4 <= n; i += 4) amax4 = wasm_f32x4_pmax(amax4, wasm_f32x4_abs(Load(v + i)));
  float amax = MaxLanes(amax4);
  for (; i < n; ++i) amax = std::max(amax, std::fabs(v[i]));
  const float s = amax > 0.f ? amax / 127.0f : 1.0f;
  const v128_t inv = wasm_f32x4_splat(1.0f / s);
  auto codes = [&](const float* p) {
    return LowBytes16(RoundToI32(wasm_f32x4_mul(Load(p), inv)),
                      RoundToI32(wasm_f32x4_mul(Load(p + 4), inv)),
                      RoundToI32(wasm_f32x4_mul(Load(p + 8), inv)),
                      RoundToI32(wasm_f32x4_mul(Load(p + 12), inv)));
  };
  i = 0;
  for (; i + 16 <= n; i += 16) Store(q + i, codes(v + i));
  if (i < n) {  // (a variable-size memcpy is a call in wasm: only for a partial block)
    alignas(16) float buf[16] = {};
    alignas(16) int8_t out[16];
    std::memcpy(buf, v + i, (n - i) * sizeof(float));
    Store(out, codes(buf));
    std::memcpy(q + i, out, n - i);
  }
  return s;
}

}  // namespace needle::kernels
