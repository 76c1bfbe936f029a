// Facts about the process and machine for reports: peak/current RSS, CPU model, core count.
#pragma once

#include <cstdint>
#include <string>

namespace needle::report {

// Peak resident set size of this process so far, in bytes (VmHWM; getrusage fallback).
uint64_t PeakRssBytes();
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

}  // namespace needle::report
