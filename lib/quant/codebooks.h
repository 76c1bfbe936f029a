// Lloyd-Max Gaussian codebooks regenerated exactly as the upstream quantizer computes them
// (numpy RandomState(0).randn, 400,000 samples, 200 iterations), spec: FORMAT.md.
#pragma once

#include <cstdint>
#include <vector>

namespace needle::quant {

// Sorted codebook for `bits` (2, 3 or 4) divided by sqrt(group), rounded to f32. Bit-identical
// to the upstream values. Cached after the first call per (bits, group); thread-safe.
std::vector<float> LloydMaxCodebook(uint32_t bits, uint32_t group);

// The 28 file codebook values cb2 | cb3 | cb4 for `group`.
std::vector<float> FileCodebooks(uint32_t group);

// numpy legacy RandomState: MT19937 + polar Gaussians (exposed for tests).
class NumpyRandomState {
 public:
  explicit NumpyRandomState(uint32_t seed);
  uint32_t NextU32();
  double NextDouble();  // [0, 1), 53-bit: (a>>5, b>>6)
  double NextGaussian();  // legacy polar method with a cached second value

 private:
  uint32_t mt_[624];
  int index_;
  bool has_gauss_ = false;
  double gauss_ = 0.0;
};

}  // namespace needle::quant
