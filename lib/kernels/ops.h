// Small model-agnostic vector operations (norms, activations, softmax, RoPE, dot products).
// Plain loops in a fixed order: the results are the f32 reference the faster paths are held to.
#pragma once

#include <cmath>
#include <cstddef>

namespace needle::kernels {

inline float Sigmoid(float z) { return 1.f / (1.f + std::exp(-z)); }
inline float Silu(float z) { return z * Sigmoid(z); }

// Fixed summation order (8 interleaved partial sums), identical on every ISA.
float Dot(const float* a, const float* b, size_t n);
// 1 / sqrt(mean(x^2) + eps).
float InvRms(const float* x, size_t n, float eps);
// out = x * inv_rms(x)   (in place allowed).
void RmsUnit(const float* x, size_t n, float eps, float* out);
// Zero-centred RMS norm: out = (1 + scale) * x * inv_rms(x)   (in place allowed).
void ZcNorm(const float* x, const float* scale, size_t n, float eps, float* out);
// In-place softmax over n values (max-subtracted).
void Softmax(float* x, size_t n);
// Log-sum-exp of n values (max-subtracted), with stride between values.
float LogSumExp(const float* x, size_t n, size_t stride);

// RoPE inverse frequencies for a head of size head_dim: f_j = 1 / theta^(2j/head_dim), j < hd/2.
void RopeFrequencies(size_t head_dim, float theta, float* freqs);
// Half-split rotary embedding of one head vector at position pos: pairs (j, j + hd/2).
void RopeHalfSplit(float* h, size_t head_dim, const float* freqs, float pos);
// The same rotation split in two, for many heads at one position: RopeAngles fills
// cos_sin [head_dim] = (cos(pos * f_j) for j < hd/2, then the sines) once, RopeRotate applies it
// to a head. Bit-identical to RopeHalfSplit.
void RopeAngles(size_t head_dim, const float* freqs, float pos, float* cos_sin);
void RopeRotate(float* h, size_t head_dim, const float* cos_sin);

// y += a * x
void Axpy(float a, const float* x, float* y, size_t n);

}  // namespace needle::kernels
