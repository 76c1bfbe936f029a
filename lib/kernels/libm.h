// Ports of the musl libm single-precision routines the official engine links (NUMERICS.md §9):
// expf, logf and powf (ARM optimized-routines: 32-entry exp2 table, 16-entry log/log2 tables) and
// sinf, cosf (FreeBSD kernels __sindf/__cosdf with __rem_pio2f). Written from the algorithms and
// the engine's constants, not from the platform's libm, so every machine and ISA gives the same
// bits; each equals the engine's function bit for bit (tests/libm_test.cpp; NaN payloads aside).
// Only sin/cos of |x| >= 2^28*pi/2 use a different argument reduction (see libm.cpp); it agreed
// with the engine on every sample tried, but that is not proven.
// Bit-exact code: built with -ffp-contract=off; the order of operations is part of the contract.
// Pure functions of their arguments: thread-safe, no errno, no floating-point exception flags
// relied upon.
#pragma once

namespace needle::kernels::libm {

float Expf(float x);
float Logf(float x);
float Sinf(float x);
float Cosf(float x);
float Powf(float x, float y);
// musl's double exp and log, as the engine computes its protocol's probabilities (libm_double.cpp).
double Exp(double x);
double Log(double x);

}  // namespace needle::kernels::libm
