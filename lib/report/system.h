// Facts about the process and machine for reports: peak/current RSS, CPU model, core count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace needle::report {

// Peak resident set size of this process so far, in bytes (VmHWM; getrusage fallback).
uint64_t PeakRssBytes();
// Resets the peak (VmHWM) to the current RSS (writes 5 to /proc/self/clear_refs, Linux); returns
// false where that is not possible (the peak then stays process-wide).
bool ResetPeakRss();
// Current resident set size in bytes (VmRSS).
uint64_t CurrentRssBytes();

struct SystemInfo {
  // "AMD EPYC 7B13" (x86: /proc/cpuinfo "model name"); on ARM the board and the core from the
  // MIDR: "Raspberry Pi 5 Model B Rev 1.0 (ARM Cortex-A76 r4p1)"; else the architecture.
  std::string cpu_model;
  int logical_cores = 0;
  std::string os;        // "Linux 6.1.0-18-amd64 x86_64"
  std::string compiler;  // "GCC 12.2.0"
  std::string version;   // needle version
  // Git commit and CMake build type of this build (filled by the caller that knows them; empty =
  // not reported).
  std::string commit, build_type;
  // Kernel ISAs this build and CPU can run, fastest last (filled by the caller that knows them:
  // kernels::AvailableIsas(); empty = not reported).
  std::vector<std::string> isas;
};
SystemInfo GetSystemInfo();

// The CPU model line from the text of /proc/cpuinfo and, when known, the MIDR_EL1 value (ARM:
// /sys/devices/system/cpu/cpu0/regs/identification/midr_el1, 0 if absent). x86: "model name";
// ARM: the "Model" / "Hardware" line (board) plus the core named from the MIDR or from the "CPU
// implementer" / "CPU part" / "CPU variant" / "CPU revision" lines. Empty if none of these.
std::string CpuModelFromCpuinfo(const std::string& cpuinfo, uint64_t midr);
// "ARM Cortex-A76 r4p1" for MIDR 0x414fd0b1; unknown parts as "implementer 0x41 part 0xd0b r4p1".
std::string ArmCoreName(uint64_t midr);

// Read bandwidth of this machine now, in bytes per second: the best of repeated sequential reads
// of a `bytes` buffer (the size a decoded token streams: the cache level it lives in is the one
// measured) within about `budget_seconds`. A machine limit to judge kernels against, measured in
// the same run as they are (the machine may be shared and noisy).
double MeasureReadBandwidth(size_t bytes, double budget_seconds);

// Units per second of `work` now (one call returns the units it did, e.g. the multiply-adds of
// kernels::MacPeakFn): the best of repeated calls (at least 3) within about `budget_seconds`.
double MeasureRate(const std::function<uint64_t()>& work, double budget_seconds);

}  // namespace needle::report
