// Lloyd-Max codebook regeneration: numpy's legacy Gaussian generator and the upstream 1-D
// k-means fit, reproduced operation for operation (FORMAT.md "Codebook regeneration").
#include "quant/codebooks.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <mutex>

#include "base/error.h"

namespace needle::quant {
namespace {

constexpr int kStateLen = 624;
constexpr size_t kPairwiseBlock = 128;  // numpy's PW_BLOCKSIZE

template <class T>
T PairwiseSum(const T* a, size_t n) {
  if (n < 8) {
    T res = 0;
    for (size_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= kPairwiseBlock) {
    T r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    size_t i = 8;
    for (; i < n - (n % 8); i += 8) {
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    }
    T res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  size_t n2 = n / 2;
  n2 -= n2 % 8;
  return PairwiseSum(a, n2) + PairwiseSum(a + n2, n - n2);
}

}  // namespace

double NumpyPairwiseSum(const double* a, size_t n) { return PairwiseSum(a, n); }
float NumpyPairwiseSum(const float* a, size_t n) { return PairwiseSum(a, n); }

NumpyRandomState::NumpyRandomState(uint32_t seed) {
  mt_[0] = seed;
  for (int i = 1; i < kStateLen; ++i) {
    mt_[i] = 1812433253u * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + static_cast<uint32_t>(i);
  }
  index_ = kStateLen;  // the first draw regenerates the whole state
}

void NumpyRandomState::Twist() {
  constexpr uint32_t kUpper = 0x80000000u, kLower = 0x7fffffffu, kMatrixA = 0x9908b0dfu;
  for (int i = 0; i < kStateLen; ++i) {
    const uint32_t y = (mt_[i] & kUpper) | (mt_[(i + 1) % kStateLen] & kLower);
    mt_[i] = mt_[(i + 397) % kStateLen] ^ (y >> 1) ^ ((y & 1u) ? kMatrixA : 0u);
  }
  index_ = 0;
}

uint32_t NumpyRandomState::NextU32() {
  if (index_ >= kStateLen) Twist();
  uint32_t y = mt_[index_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

double NumpyRandomState::NextDouble() {
  const uint32_t a = NextU32() >> 5, b = NextU32() >> 6;  // 27 + 26 = 53 random bits
  return (a * 67108864.0 + b) / 9007199254740992.0;
}

double NumpyRandomState::NextGaussian() {
  if (has_gauss_) {
    has_gauss_ = false;
    return gauss_;
  }
  double x1, x2, r2;
  do {
    x1 = 2.0 * NextDouble() - 1.0;
    x2 = 2.0 * NextDouble() - 1.0;
    r2 = x1 * x1 + x2 * x2;
  } while (r2 >= 1.0 || r2 == 0.0);
  const double f = std::sqrt(-2.0 * std::log(r2) / r2);
  gauss_ = f * x1;
  has_gauss_ = true;
  return f * x2;
}

std::vector<double> FitLloydMaxGaussian(uint32_t bits, uint32_t iterations, uint32_t samples,
                                        uint32_t seed) {
  if (bits < 1 || bits > 8) Fail<InvalidInput>("Lloyd-Max codebook: bits {} not in 1..8", bits);
  const size_t levels = size_t{1} << bits;
  if (samples < levels) {
    Fail<InvalidInput>("Lloyd-Max codebook: {} samples for {} levels", samples, levels);
  }
  std::vector<double> x(samples);
  NumpyRandomState rng(seed);
  for (double& v : x) v = rng.NextGaussian();
  std::sort(x.begin(), x.end());

  // Initial centroids at the quantiles (k + 0.5) / levels, computed in the upstream order.
  std::vector<double> c(levels);
  for (size_t k = 0; k < levels; ++k) {
    const double q = (static_cast<double>(k) + 0.5) / static_cast<double>(levels) * samples;
    c[k] = x[static_cast<size_t>(q)];
  }
  // Each round: a sample belongs to cell k when bnd[k-1] < x <= bnd[k] (numpy searchsorted,
  // side left); x is sorted, so every cell is a contiguous run [start[k], start[k+1]).
  std::vector<double> bnd(levels - 1);
  std::vector<size_t> start(levels + 1);
  for (uint32_t it = 0; it < iterations; ++it) {
    for (size_t k = 0; k + 1 < levels; ++k) bnd[k] = (c[k] + c[k + 1]) / 2.0;
    start[0] = 0;
    start[levels] = x.size();
    for (size_t k = 1; k < levels; ++k) {
      start[k] = static_cast<size_t>(std::upper_bound(x.begin(), x.end(), bnd[k - 1]) - x.begin());
      start[k] = std::max(start[k], start[k - 1]);  // centroids stay sorted; guard anyway
    }
    for (size_t k = 0; k < levels; ++k) {
      const size_t count = start[k + 1] - start[k];
      if (count == 0) continue;  // empty cell keeps its centroid
      // np.mean: pairwise sum of the cell (0 + sum), divided by the count.
      c[k] = (0.0 + PairwiseSum(x.data() + start[k], count)) / static_cast<double>(count);
    }
  }
  std::sort(c.begin(), c.end());
  return c;
}

std::vector<float> LloydMaxCodebook(uint32_t bits, uint32_t group) {
  if (bits < 2 || bits > 4) Fail<InvalidInput>("CQ codebook: bits {} not in 2..4", bits);
  if (!std::has_single_bit(group))
    Fail<InvalidInput>("CQ codebook: group {} is not a power of two", group);
  static std::mutex mutex;
  static std::array<std::vector<double>, 5> fitted;  // by bits
  std::vector<double> c;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (fitted[bits].empty()) fitted[bits] = FitLloydMaxGaussian(bits);
    c = fitted[bits];
  }
  const double scale = std::sqrt(static_cast<double>(group));
  std::vector<float> out(c.size());
  for (size_t k = 0; k < c.size(); ++k) out[k] = static_cast<float>(c[k] / scale);
  return out;
}

std::vector<float> FileCodebooks(uint32_t group) {
  std::vector<float> out;
  out.reserve(28);
  for (uint32_t bits = 2; bits <= 4; ++bits) {
    const std::vector<float> cb = LloydMaxCodebook(bits, group);
    out.insert(out.end(), cb.begin(), cb.end());
  }
  return out;
}

}  // namespace needle::quant
