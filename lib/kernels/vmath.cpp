// Scalar references of the array kernels of kernels/vmath.h (plain loops over the libm ports) and
// the array version of the Sinkhorn normalization.
#include "kernels/vmath.h"

#include "kernels/libm.h"

namespace needle::kernels {

void ExpfArrayReference(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = libm::Expf(x[i]);
}

void LogfArrayReference(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = libm::Logf(x[i]);
}

void SinkhornArrays(ExpfArrayFn expf_array, LogfArrayFn logf_array, float* P, size_t n,
                    size_t count, int rounds, float* scratch) {
  const size_t nn = n * n;
  float* diff = scratch;         // [count, n*n]
  float* m = diff + count * nn;  // [count, n]
  float* sum = m + count * n;    // [count, n]
  for (int round = 0; round < rounds; ++round) {
    for (int phase = 0; phase < 2; ++phase) {
      // Row phase: line l = row l, element k at l*n + k; column phase: line l = column l.
      const size_t line_stride = phase == 0 ? n : 1, elem_stride = phase == 0 ? 1 : n;
      for (size_t c = 0; c < count; ++c) {
        const float* Pc = P + c * nn;
        for (size_t l = 0; l < n; ++l) {
          float mx = -1e30f;
          for (size_t k = 0; k < n; ++k) {
            const float x = Pc[l * line_stride + k * elem_stride];
            if (mx < x) mx = x;
          }
          m[c * n + l] = mx;
          for (size_t k = 0; k < n; ++k)
            diff[c * nn + l * n + k] = Pc[l * line_stride + k * elem_stride] - mx;
        }
      }
      expf_array(diff, diff, count * nn);
      for (size_t c = 0; c < count; ++c)
        for (size_t l = 0; l < n; ++l) {
          float s = 0.f;
          for (size_t k = 0; k < n; ++k) s = s + diff[c * nn + l * n + k];
          sum[c * n + l] = s;
        }
      logf_array(sum, sum, count * n);
      for (size_t c = 0; c < count; ++c) {
        float* Pc = P + c * nn;
        for (size_t l = 0; l < n; ++l) {
          const float lse = m[c * n + l] + sum[c * n + l];
          for (size_t k = 0; k < n; ++k) {
            float& x = Pc[l * line_stride + k * elem_stride];
            x = x - lse;
          }
        }
      }
    }
  }
  expf_array(P, P, count * nn);
}

void SinkhornReference(float* P, size_t n, size_t count, int rounds, float* scratch) {
  SinkhornArrays(&ExpfArrayReference, &LogfArrayReference, P, n, count, rounds, scratch);
}

}  // namespace needle::kernels
