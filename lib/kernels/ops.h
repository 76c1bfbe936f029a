// Small model-agnostic vector operations (norms, activations, softmax, RoPE, dot products).
// Plain loops in a fixed order, with the official engine's operation orders (NUMERICS.md §2) and
// the musl libm ports (kernels/libm.h): both numeric paths share them, and the official path
// depends on their exact bits. Built with -ffp-contract=off.
#pragma once

#include <cmath>
#include <cstddef>

#include "kernels/libm.h"

namespace needle::kernels {

// 1 / (expf(-z) + 1)
inline float Sigmoid(float z) { return 1.0f / (libm::Expf(-z) + 1.0f); }
// z / (expf(-z) + 1): a division, as the engine computes SiLU.
inline float Silu(float z) { return z / (libm::Expf(-z) + 1.0f); }

// Fixed summation order (8 interleaved partial sums), identical on every ISA.
float Dot(const float* a, const float* b, size_t n);
// Sequential sum of squares: acc = 0; acc = acc + x_i * x_i in order.
float SumSquares(const float* x, size_t n);
// 1.0f / sqrtf(SumSquares(x) / (float)n + eps)   (a division by n, not a multiply by 1/n).
float InvRms(const float* x, size_t n, float eps);
// out_i = inv_rms(x) * x_i   (in place allowed).
void RmsUnit(const float* x, size_t n, float eps, float* out);
// Zero-centred RMS norm: out_i = inv_rms(x) * (x_i * (scale_i + 1.0f))   (in place allowed).
void ZcNorm(const float* x, const float* scale, size_t n, float eps, float* out);
// ZcNorm of `rows` consecutive rows of n values (x [rows, n], out may alias x), one scale for all.
// Each row's sum runs in its own order as in ZcNorm; the rows' sums are interleaved so their
// dependency chains overlap (per-head norms: 12 chains of 64 instead of one of 768).
void ZcNormRows(const float* x, const float* scale, size_t rows, size_t n, float eps, float* out);
// inv[r] = InvRms(x + r * ldx, n, eps) for r < rows, the rows' sums interleaved as in ZcNormRows
// (tokens of a prefill block: each its own sequential chain, 16 chains overlapping).
void InvRmsRows(const float* x, size_t ldx, size_t rows, size_t n, float eps, float* inv);
// RmsUnit / ZcNorm of `rows` rows with row strides ldx (input) and ldo (output; out may alias x
// when ldo == ldx), through InvRmsRows.
void RmsUnitRows(const float* x, size_t ldx, size_t rows, size_t n, float eps, float* out,
                 size_t ldo);
void ZcNormRowsStrided(const float* x, size_t ldx, const float* scale, size_t rows, size_t n,
                       float eps, float* out, size_t ldo);
// In-place softmax over n values (max-subtracted, musl expf, sequential sum).
void Softmax(float* x, size_t n);
// Log-sum-exp of n values with stride between values, as the engine's Sinkhorn: m = -1e30f,
// `if (m < x) m = x`; s = sequential sum of expf(x - m); m + logf(s).
float LogSumExp(const float* x, size_t n, size_t stride);

// RoPE inverse frequencies for a head of size head_dim: f_j = 1.0f / powf(theta, (float)(2j) /
// (float)head_dim), j < hd/2 (the exponent's numerator is the f32 sum j + j).
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

// Element-wise chains of the layer (each element its own operations in the written order, so
// every vector width gives the same bits). On x86 they are compiled for AVX-512, AVX2 and the
// baseline and chosen when the program loads (the model code itself is built without ISA flags).
// X, out: [lanes, d] lane-major.
// LaneMean: out_i = (((0 + X_0,i) + X_1,i) + ...) / lanes; X is [lanes, d].
void LaneMean(const float* X, size_t lanes, size_t d, float* out);
// LaneBlend: u = 0; u = h_j * X_j + u for j = 0 .. lanes-1.
void LaneBlend(const float* h, const float* X, size_t lanes, size_t d, float* u);
// LaneMix: out_r = y * hpost_r, then out_r = P[r * lanes + b] * X_b + out_r for b = 0 .. lanes-1.
void LaneMix(const float* y, const float* hpost, const float* P, const float* X, size_t lanes,
             size_t d, float* out);
// The Hadamard MLP's element-wise steps (MODEL.md / NUMERICS.md §4.3.8):
// MulInto: z_i = z_i * s_i.
void MulInto(float* z, const float* s, size_t n);
// ScaleMulNeg: z_i = (c * z_i) * s_i; neg_i = -z_i.
void ScaleMulNeg(float* z, float c, const float* s, size_t n, float* neg);
// DivOnePlus: z_i = z_i / (e_i + 1.0f).
void DivOnePlus(float* z, const float* e, size_t n);
// MlpOut: y_i = (x_i + (c * z_i) * s_i) - u_i.
void MlpOut(const float* x, const float* z, float c, const float* s, const float* u, size_t n,
            float* y);
// Negate: y_i = -x_i.
void Negate(const float* x, size_t n, float* y);
// GateMul: o_i = o_i * (1.0f / (e_i + 1.0f))   (the attention gate, e = expf(-g)).
void GateMul(float* o, const float* e, size_t n);
// AddScaled: out_i = a * x_i + y_i.
void AddScaled(float a, const float* x, const float* y, size_t n, float* out);
// ArgMax: the index std::max_element(x, x + n) returns (the first of the largest; n >= 1), with
// a vectorizable maximum pass first (a NaN anywhere falls back to the sequential scan).
size_t ArgMax(const float* x, size_t n);
// Scale: x_i = a * x_i.
void Scale(float a, float* x, size_t n);
// Dots16: 16 dot chains at once, dots[q] = seq-sum over i of x_i * p[16 i + q] (acc = x_i * p +
// acc from 0, i in order; p holds 16 vectors element-major).
void Dots16(const float* x, const float* p, size_t n, float* dots);

}  // namespace needle::kernels
