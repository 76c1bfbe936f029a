// Fast Walsh-Hadamard transform, normalized (x <- x @ H, H[i][j] = (-1)^popcount(i&j)/sqrt(n)).
// Model-agnostic; scalar reference plus ISA versions behind the same signature.
#pragma once

#include <cstddef>

namespace needle::kernels {

// In place; n must be a power of two. Scalar reference (butterflies, then one scale by 1/sqrt(n)).
void FwhtReference(float* x, size_t n);

// Dispatched version (fastest available ISA); results may differ from the reference only by
// summation order.
void Fwht(float* x, size_t n);

}  // namespace needle::kernels
