// WebAssembly SIMD128 versions of the official-numerics kernels (wasm builds only, where every
// object is compiled with -msimd128). Bit-exact: each function gives the same bits as its scalar
// reference (cq_int8.cpp, attention_i8.cpp, QuantizeI8); the integer CQ products use the
// activation layout of cq_int8_x86.h (I8LayoutPositionX86), so the tests treat this table like
// the x86 ones.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/attention_i8.h"
#include "kernels/cq_int8.h"

namespace needle::kernels {

#if defined(NEEDLE_WASM)
// Integer CQ products: int8 weights from i8x16.swizzle table lookups, widened to int16 and
// multiplied by i32x4.dot_i16x8_s against int16 activations (exact for every int8 value).
void CqQuantizeI8Simd128(const float* x, size_t n, size_t cols, size_t ldx, size_t in_pad,
                         uint32_t code_bits, int8_t* q, float* scales);
void CqGemmI8Simd128(const CqMatrix& m, const I8Codebook& cb, const I8Acts& acts, size_t row_begin,
                     size_t row_end, float* y, size_t ldy);
int32_t DotI8Simd128(const int8_t* a, const int8_t* b, size_t n);
// The engine's int8 quantizer (vmath.h's QuantizeI8Fn), 4 floats per step.
float QuantizeI8Simd128(const float* v, size_t n, int8_t* q);
// Int8 attention (attention_i8.h); falls back to the reference when heads * head_dim / 64 >
// kAttendMaxRow.
void AttendI8Simd128(const I8Queries& q, const I8KvView& kv, const uint32_t* slots, size_t count,
                     AttendExpfFn expf_array, float* scores, float* o);
#endif

}  // namespace needle::kernels
