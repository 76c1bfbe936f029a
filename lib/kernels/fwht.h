// Fast Walsh-Hadamard transform, normalized (x <- x @ H, H[i][j] = (-1)^popcount(i&j)/sqrt(n)).
// Model-agnostic; scalar reference plus ISA versions behind the same signature.
#pragma once

#include <cstddef>

namespace needle::kernels {

// The normalization 1/sqrt(n) as applied: f32(1) / f32(sqrt(n)) (the CQ exporter's rounding).
float FwhtScale(size_t n);

// In place; n must be a power of two. Scalar reference (butterflies stage by stage, h = 1, 2,
// 4, ..., then one multiply by FwhtScale(n)).
void FwhtReference(float* x, size_t n);

// The butterflies alone (no scaling): the official engine's WHT_unnorm (NUMERICS.md §2). Scalar
// reference; FwhtUnnormalized dispatches like Fwht (bit-identical).
void FwhtUnnormalizedReference(float* x, size_t n);
void FwhtUnnormalized(float* x, size_t n);

// Dispatched version (fastest ISA allowed by kernels::ActiveIsa()). Thread-safe, no allocation.
// The ISA versions perform the same butterflies in the same order as the reference, so the
// results are bit-identical to FwhtReference (the tests hold them to that).
void Fwht(float* x, size_t n);

#if defined(NEEDLE_X86)
// AVX2 version; n must be a power of two >= 8. Call only if the CPU supports AVX2 (see
// kernels/cpu_features.h).
void FwhtAvx2(float* x, size_t n);
void FwhtUnnormalizedAvx2(float* x, size_t n);
#endif

}  // namespace needle::kernels
