// Scalar references of the array kernels of kernels/vmath.h: plain loops over the libm ports.
#include "kernels/vmath.h"

#include "kernels/libm.h"

namespace needle::kernels {

void ExpfArrayReference(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = libm::Expf(x[i]);
}

void LogfArrayReference(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = libm::Logf(x[i]);
}

}  // namespace needle::kernels
