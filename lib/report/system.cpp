// Process and machine facts from /proc and uname.
#include "report/system.h"

#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <vector>

namespace needle::report {

namespace {
// Value in kB of a "Key:   123 kB" line of /proc/self/status, or 0.
uint64_t StatusKb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const std::string k = std::string(key) + ":";
  while (std::getline(f, line)) {
    if (line.rfind(k, 0) == 0) {
      std::istringstream ss(line.substr(k.size()));
      uint64_t v = 0;
      ss >> v;
      return v;
    }
  }
  return 0;
}
}  // namespace

bool ResetPeakRss() {
  std::ofstream f("/proc/self/clear_refs");
  if (!f) return false;
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

uint64_t PeakRssBytes() {
  uint64_t kb = StatusKb("VmHWM");
  if (kb == 0) {
    rusage ru{};
    if (getrusage(RUSAGE_SELF, &ru) == 0) kb = static_cast<uint64_t>(ru.ru_maxrss);
  }
  return kb * 1024;
}

uint64_t CurrentRssBytes() { return StatusKb("VmRSS") * 1024; }

SystemInfo GetSystemInfo() {
  SystemInfo s;
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    // x86: "model name : ..."; ARM: "Model : Raspberry Pi 5 ..." or "CPU part".
    if (line.rfind("model name", 0) == 0 || line.rfind("Model", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        s.cpu_model = line.substr(line.find_first_not_of(" \t", colon + 1));
        break;
      }
    }
  }
  utsname u{};
  if (uname(&u) == 0) {
    s.os = std::string(u.sysname) + " " + u.release + " " + u.machine;
    if (s.cpu_model.empty()) s.cpu_model = u.machine;
  }
  s.logical_cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
#if defined(__clang__)
  s.compiler = "Clang " __clang_version__;
#elif defined(__GNUC__)
  s.compiler = "GCC " __VERSION__;
#endif
  s.version = NEEDLE_VERSION;
  return s;
}

double MeasureReadBandwidth(size_t bytes, double budget_seconds) {
  using Clock = std::chrono::steady_clock;
  const size_t words = std::max<size_t>(bytes / 8, 1024) / 8 * 8;
  std::vector<uint64_t> buf(words);
  for (size_t i = 0; i < words; ++i) buf[i] = i;  // touched: resident before timing
  double best = 0;
  uint64_t sink = 0;
  const Clock::time_point end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                   std::chrono::duration<double>(budget_seconds));
  for (int pass = 0; pass < 3 || Clock::now() < end; ++pass) {
    const Clock::time_point t0 = Clock::now();
    uint64_t acc[8] = {};  // independent chains: the loads, not the adds, set the pace
    for (size_t i = 0; i < words; i += 8)
      for (size_t j = 0; j < 8; ++j) acc[j] += buf[i + j];
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    for (uint64_t a : acc) sink ^= a;
    if (s > 0) best = std::max(best, static_cast<double>(words * 8) / s);
    if (pass > 1000) break;
  }
  __asm__ volatile("" : : "r"(sink));  // the sums must not be optimized away
  return best;
}

}  // namespace needle::report
