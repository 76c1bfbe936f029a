// Sample statistics.
#include "report/timer.h"

#include <algorithm>
#include <cmath>

namespace needle::report {

double Median(std::vector<double> s) {
  if (s.empty()) return 0.0;
  std::sort(s.begin(), s.end());
  const size_t n = s.size();
  return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

double MedianAbsDeviation(const std::vector<double>& s) {
  if (s.size() < 2) return 0.0;
  const double m = Median(s);
  std::vector<double> dev;
  dev.reserve(s.size());
  for (double x : s) dev.push_back(std::fabs(x - m));
  return Median(dev);
}

}  // namespace needle::report
