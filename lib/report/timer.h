// Wall-clock stopwatch and summary statistics for benchmark samples.
#pragma once

#include <chrono>
#include <vector>

namespace needle::report {

class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  void Reset() { start_ = std::chrono::steady_clock::now(); }
  double Seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

// Median of samples (mean of the two middle values for even counts); 0 for none.
double Median(std::vector<double> samples);
// Median absolute deviation around the median; 0 for fewer than two samples.
double MedianAbsDeviation(const std::vector<double>& samples);

}  // namespace needle::report
