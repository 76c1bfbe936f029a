// Array versions of the bit-exact libm ports (kernels/libm.h) and of the engine's int8 quantizer
// (kernels::QuantizeI8), per ISA, for the kernel table (kernels/dispatch.h). Every ISA gives the
// scalar port's bits on every input (NaN payloads aside): the SIMD versions run the same double
// operations in the same order lane by lane (no FMA; table lookups by vpgather., and the
// special inputs (overflow, underflow, NaN, +-inf, zero, negative and subnormal logf arguments)
// take the scalar function's results. tests/vmath_test.cpp checks every ISA against the scalar.
// Bit-exact code: built with -ffp-contract=off. All functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

namespace needle::kernels {

// y[i] = libm::Expf(x[i]) for i < n. x == y (in place) is allowed; other overlaps are not.
using ExpfArrayFn = void (*)(const float* x, float* y, size_t n);
// y[i] = libm::Logf(x[i]) for i < n. x == y (in place) is allowed; other overlaps are not.
using LogfArrayFn = void (*)(const float* x, float* y, size_t n);
// Same q[0..n) and return value (the scale s) as kernels::QuantizeI8(v, n, q) (cq_int8.h).
using QuantizeI8Fn = float (*)(const float* v, size_t n, int8_t* q);

// Sinkhorn normalization in the log domain, in the engine's order (NUMERICS.md, mHC step 10), of
// `count` n x n matrices (P[c * n * n + row * n + col]): `rounds` rounds that first normalize every
// row, then every column, each line by its log-sum-exp (m = the running max from -1e30f, `if (m <
// x) m = x` in element order; s = the sum of Expf(x - m) in element order; x = x - (m + Logf(s))),
// then P = Expf(P). `scratch` holds count * (n * n + 2 * n) floats (the array version's).
using SinkhornFn = void (*)(float* P, size_t n, size_t count, int rounds, float* scratch);

// Scalar references: loops over libm::Expf / libm::Logf (the quantizer's reference is
// kernels::QuantizeI8 itself).
void ExpfArrayReference(const float* x, float* y, size_t n);
void LogfArrayReference(const float* x, float* y, size_t n);

// Sinkhorn for any n over an ISA's array kernels: every exponential (logarithm) of a phase, over
// all matrices, is one array call (the same bits as one call per value).
void SinkhornArrays(ExpfArrayFn expf_array, LogfArrayFn logf_array, float* P, size_t n,
                    size_t count, int rounds, float* scratch);
// The reference: SinkhornArrays over the scalar libm ports.
void SinkhornReference(float* P, size_t n, size_t count, int rounds, float* scratch);

#if defined(NEEDLE_X86)
// AVX2: 8 floats per step as two vectors of 4 doubles; table lookups by vpgather.
void ExpfArrayAvx2(const float* x, float* y, size_t n);
void LogfArrayAvx2(const float* x, float* y, size_t n);
float QuantizeI8Avx2(const float* v, size_t n, int8_t* q);
// n = 4: each matrix in two vectors, two matrices' chains interleaved; other n: SinkhornArrays
// over the AVX2 arrays.
void SinkhornAvx2(float* P, size_t n, size_t count, int rounds, float* scratch);

// AVX-512 F/DQ/VL: 16 floats per step as two vectors of 8 doubles; lookups by vpermt2pd.
void ExpfArrayAvx512(const float* x, float* y, size_t n);
void LogfArrayAvx512(const float* x, float* y, size_t n);
float QuantizeI8Avx512(const float* v, size_t n, int8_t* q);
// n = 4 (the mHC's lanes): each matrix is one vector, up to four matrices' chains interleaved, no
// memory round trips; other n: SinkhornArrays over the AVX-512 arrays.
void SinkhornAvx512(float* P, size_t n, size_t count, int rounds, float* scratch);
#endif

// Constants of libm::Expf / libm::Logf (read from the engine's wasm data section by
// scripts/official/extract_libm_constants.py), the one copy used by kernels/libm.cpp and the ISA
// files; tests/libm_test.cpp and tests/vmath_test.cpp hold both to the engine's bits.
namespace vmath_internal {
// 2^(i/32) as double bits minus i << 47; adding ki << 47 for ki = 32*e + i yields 2^(e + i/32).
alignas(64) inline constexpr uint64_t kExp2Table[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
    0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
    0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
    0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
};
inline constexpr double kExpShift = 0x1.8p+52;
inline constexpr double kExpInvLn2N = 0x1.71547652b82fep+5;
inline constexpr double kExpPoly[3] = {0x1.c6af84b912394p-20, 0x1.ebfce50fac4f3p-13,
                                       0x1.62e42ff0c52d6p-6};
// Expf gives +inf above, +0 below these (and x + x for NaN).
inline constexpr float kExpOverflow = 0x1.62e42ep6f;
inline constexpr float kExpUnderflow = -0x1.9fe368p6f;

// logf: {1/c, ln c} of 16 subintervals of [0x1.66p-1, 0x1.66p0), as two arrays.
alignas(64) inline constexpr double kLogInvC[16] = {
    0x1.661ec79f8f3bep+0, 0x1.571ed4aaf883dp+0,
    0x1.49539f0f010b0p+0, 0x1.3c995b0b80385p+0,
    0x1.30d190c8864a5p+0, 0x1.25e227b0b8ea0p+0,
    0x1.1bb4a4a1a343fp+0, 0x1.12358f08ae5bap+0,
    0x1.0953f419900a7p+0, 0x1.0p+0,
    0x1.e608cfd9a47acp-1, 0x1.ca4b31f026aa0p-1,
    0x1.b2036576afce6p-1, 0x1.9c2d163a1aa2dp-1,
    0x1.886e6037841edp-1, 0x1.767dcf5534862p-1,
};
alignas(64) inline constexpr double kLogLogC[16] = {
    -0x1.57bf7808caadep-2, -0x1.2bef0a7c06ddbp-2,
    -0x1.01eae7f513a67p-2, -0x1.b31d8a68224e9p-3,
    -0x1.6574f0ac07758p-3, -0x1.1aa2bc79c8100p-3,
    -0x1.a4e76ce8c0e5ep-4, -0x1.1973c5a611cccp-4,
    -0x1.252f438e10c1ep-5, 0x0.0p+0,
    0x1.aa5aa5df25984p-5,  0x1.c5e53aa362eb4p-4,
    0x1.526e57720db08p-3,  0x1.bc2860d224770p-3,
    0x1.1058bc8a07ee1p-2,  0x1.4043057b6ee09p-2,
};
inline constexpr double kLogLn2 = 0x1.62e42fefa39efp-1;
inline constexpr double kLogPoly[3] = {-0x1.00ea348b88334p-2, 0x1.5575b0be00b6ap-2,
                                       -0x1.ffffef20a4123p-2};
// Subtracting kLogOff from the bits of a normal x puts the subinterval index in bits 19..22 and
// the exponent k in the top 9 bits.
inline constexpr uint32_t kLogOff = 0x3f330000;
}  // namespace vmath_internal

}  // namespace needle::kernels
