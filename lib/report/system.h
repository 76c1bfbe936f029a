// Facts about the process and machine for reports: peak/current RSS, CPU model, core count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace needle::report {

// Peak resident set size of this process so far, in bytes (VmHWM; getrusage fallback).
uint64_t PeakRssBytes();
// Resets the peak (VmHWM) to the current RSS (writes 5 to /proc/self/clear_refs, Linux); returns
// false where that is not possible (the peak then stays process-wide).
bool ResetPeakRss();
// Current resident set size in bytes (VmRSS).
uint64_t CurrentRssBytes();

struct SystemInfo {
  std::string cpu_model;  // "AMD EPYC 7B13" (from /proc/cpuinfo), or the architecture
  int logical_cores = 0;
  std::string os;        // "Linux 6.1.0-18-amd64 x86_64"
  std::string compiler;  // "GCC 12.2.0"
  std::string version;   // needle version
};
SystemInfo GetSystemInfo();

// Read bandwidth of this machine now, in bytes per second: the best of repeated sequential reads
// of a `bytes` buffer (the size a decoded token streams: the cache level it lives in is the one
// measured) within about `budget_seconds`. A machine limit to judge kernels against, measured in
// the same run as they are (the machine may be shared and noisy).
double MeasureReadBandwidth(size_t bytes, double budget_seconds);

}  // namespace needle::report
