// Lloyd-Max Gaussian codebooks regenerated exactly as the upstream quantizer computes them
// (numpy RandomState(0).randn, 400,000 samples, 200 iterations), spec: FORMAT.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace needle::quant {

// Sorted codebook for `bits` (2, 3 or 4) divided by sqrt(group), rounded to f32. Bit-identical
// to the upstream values. The unscaled fit is cached after the first call per `bits` (about
// 0.1 s each); thread-safe. Throws InvalidInput for other bits or a group that is not a power
// of two.
std::vector<float> LloydMaxCodebook(uint32_t bits, uint32_t group);

// The unscaled Lloyd-Max centroids (float64, sorted) for 2^bits levels, fitted to `samples`
// draws of RandomState(seed).randn over `iterations` rounds. Uncached; exposed for tests.
std::vector<double> FitLloydMaxGaussian(uint32_t bits, uint32_t iterations = 200,
                                        uint32_t samples = 400000, uint32_t seed = 0);

// The 28 file codebook values cb2 | cb3 | cb4 for `group`.
std::vector<float> FileCodebooks(uint32_t group);

// numpy's sum of a contiguous array (pairwise summation, 8 accumulators in blocks of at most
// 128 elements), reproduced operation for operation so results match numpy bit for bit.
double NumpyPairwiseSum(const double* a, size_t n);
float NumpyPairwiseSum(const float* a, size_t n);

// numpy legacy RandomState: MT19937 + polar Gaussians (exposed for tests).
class NumpyRandomState {
 public:
  explicit NumpyRandomState(uint32_t seed);  // MT19937 init_genrand(seed)
  uint32_t NextU32();
  double NextDouble();    // [0, 1), 53-bit: (a>>5, b>>6)
  double NextGaussian();  // legacy polar method with a cached second value

 private:
  void Twist();

  uint32_t mt_[624];
  int index_;
  bool has_gauss_ = false;
  double gauss_ = 0.0;
};

}  // namespace needle::quant
