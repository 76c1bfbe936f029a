// WebAssembly SIMD128 versions of the kernel table's official-numerics functions
// (kernels/dispatch.h) and their int8 activation layout: the `simd128` table of wasm builds,
// where every object is compiled with -msimd128 (no runtime check: an engine without SIMD128
// refuses the module). Bit-exact: every function gives its scalar reference's bits
// (tests/kernels_i8_test.cpp, attention_i8_test.cpp, vmath_test.cpp, quant_test.cpp's FWHT test,
// run under node by scripts/test-wasm.sh).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/attention_i8.h"
#include "kernels/cq_int8.h"
#include "kernels/cq_int8_x86.h"

namespace needle::kernels {

// Position inside a 128-group of the quantized activation of column k (0 <= k < 128) in the wasm
// layout: the x86 one (cq_int8_x86.h), where one 16-byte block of positions is what one
// i8x16.swizzle of shifted / masked code bytes yields.
inline size_t I8LayoutPositionWasm(uint32_t code_bits, size_t k) {
  return I8LayoutPositionX86(code_bits, k);
}

#if defined(NEEDLE_WASM)
// Integer CQ products: int8 weights from i8x16.swizzle table lookups, widened to int16 and
// multiplied by i32x4.dot_i16x8_s against int16 activations (exact for every int8 value).
void CqQuantizeI8Simd128(const float* x, size_t n, size_t cols, size_t ldx, size_t in_pad,
                         uint32_t code_bits, int8_t* q, float* scales);
void CqGemmI8Simd128(const CqMatrix& m, const I8Codebook& cb, const I8Acts& acts, size_t row_begin,
                     size_t row_end, float* y, size_t ldy);
int32_t DotI8Simd128(const int8_t* a, const int8_t* b, size_t n);
uint64_t MacPeakSimd128(uint64_t rounds);
// vmath.h's arrays: expf / logf on two f64x2 vectors per 4 floats, the engine's int8 quantizer.
void ExpfArraySimd128(const float* x, float* y, size_t n);
void LogfArraySimd128(const float* x, float* y, size_t n);
float QuantizeI8Simd128(const float* v, size_t n, int8_t* q);
// vmath.h's Sinkhorn: n = 4 in four vectors (lines in lanes, a transpose between phases); other n
// over the arrays above.
void SinkhornSimd128(float* P, size_t n, size_t count, int rounds, float* scratch);
// Int8 attention (attention_i8.h); falls back to the reference when heads * head_dim / 64 >
// kAttendMaxRow.
void AttendI8Simd128(const I8Queries& q, const I8KvView& kv, const uint32_t* slots, size_t count,
                     AttendExpfFn expf_array, float* scores, float* o);
// FWHT (kernels/fwht.h) on 4-float vectors; n a power of two >= 8.
void FwhtSimd128(float* x, size_t n);
void FwhtUnnormalizedSimd128(float* x, size_t n);
#endif

}  // namespace needle::kernels
