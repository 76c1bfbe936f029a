// Process and machine facts from /proc and uname.
#include "report/system.h"

#include <fmt/format.h>
#include <sys/resource.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
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
#if defined(__GLIBC__)
  // Memory freed by earlier work goes back to the OS first: glibc keeps freed heap pages, and
  // after a large mmapped block is freed (the bandwidth probe's) it serves blocks up to that size
  // from the heap, so without this an earlier point's buffers would count in the next peak.
  malloc_trim(0);
#endif
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

std::string ArmCoreName(uint64_t midr) {
  const unsigned implementer = (midr >> 24) & 0xff, variant = (midr >> 20) & 0xf;
  const unsigned part = (midr >> 4) & 0xfff, revision = midr & 0xf;
  struct Part {
    unsigned implementer, part;
    const char* name;
  };
  static constexpr Part kParts[] = {
      {0x41, 0xd03, "ARM Cortex-A53"},  {0x41, 0xd04, "ARM Cortex-A35"},
      {0x41, 0xd05, "ARM Cortex-A55"},  {0x41, 0xd07, "ARM Cortex-A57"},
      {0x41, 0xd08, "ARM Cortex-A72"},  {0x41, 0xd09, "ARM Cortex-A73"},
      {0x41, 0xd0a, "ARM Cortex-A75"},  {0x41, 0xd0b, "ARM Cortex-A76"},
      {0x41, 0xd0c, "ARM Neoverse-N1"}, {0x41, 0xd0d, "ARM Cortex-A77"},
      {0x41, 0xd40, "ARM Neoverse-V1"}, {0x41, 0xd41, "ARM Cortex-A78"},
      {0x41, 0xd44, "ARM Cortex-X1"},   {0x41, 0xd46, "ARM Cortex-A510"},
      {0x41, 0xd47, "ARM Cortex-A710"}, {0x41, 0xd48, "ARM Cortex-X2"},
      {0x41, 0xd49, "ARM Neoverse-N2"}, {0x41, 0xd4b, "ARM Cortex-A78C"},
      {0x41, 0xd4f, "ARM Neoverse-V2"}, {0x41, 0xd80, "ARM Cortex-A520"},
      {0x41, 0xd81, "ARM Cortex-A720"}, {0x41, 0xd82, "ARM Cortex-X4"},
  };
  std::string name;
  for (const Part& p : kParts)
    if (p.implementer == implementer && p.part == part) name = p.name;
  if (name.empty()) name = fmt::format("implementer {:#04x} part {:#05x}", implementer, part);
  return fmt::format("{} r{}p{}", name, variant, revision);
}

std::string CpuModelFromCpuinfo(const std::string& cpuinfo, uint64_t midr) {
  std::istringstream in(cpuinfo);
  std::string line, model_name, board;
  auto value = [&](const std::string& l) {
    const auto colon = l.find(':');
    if (colon == std::string::npos) return std::string();
    const auto start = l.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? std::string() : l.substr(start);
  };
  // "key<spaces or tabs>:" at the start of the line.
  auto key_is = [&](const std::string& l, const char* key) {
    const size_t n = std::char_traits<char>::length(key);
    return l.compare(0, n, key) == 0 && l.find_first_not_of(" \t", n) == l.find(':');
  };
  // The first core's identification (big.LITTLE systems list every core): the first value of
  // each key.
  int64_t implementer = -1, variant = -1, part = -1, revision = -1;
  auto number = [&](const std::string& l, int64_t* field) {
    if (*field < 0) *field = static_cast<int64_t>(std::strtoull(value(l).c_str(), nullptr, 0));
  };
  while (std::getline(in, line)) {
    if (model_name.empty() && key_is(line, "model name")) model_name = value(line);
    if (board.empty() && (key_is(line, "Model") || key_is(line, "Hardware"))) board = value(line);
    if (key_is(line, "CPU implementer")) number(line, &implementer);
    if (key_is(line, "CPU variant")) number(line, &variant);
    if (key_is(line, "CPU part")) number(line, &part);
    if (key_is(line, "CPU revision")) number(line, &revision);
  }
  const bool have_part = implementer >= 0 && part >= 0;
  auto bits = [](int64_t v, uint64_t mask) { return v < 0 ? 0 : static_cast<uint64_t>(v) & mask; };
  if (midr == 0 && have_part)
    midr = bits(implementer, 0xff) << 24 | bits(variant, 0xf) << 20 | bits(part, 0xfff) << 4 |
           bits(revision, 0xf);
  if (midr != 0) {
    const std::string core = ArmCoreName(midr);
    return board.empty() ? core : board + " (" + core + ")";
  }
  if (!model_name.empty()) return model_name;
  return board;
}

SystemInfo GetSystemInfo() {
  SystemInfo s;
  std::ifstream f("/proc/cpuinfo");
  const std::string cpuinfo((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  uint64_t midr = 0;
#if defined(__aarch64__)
  std::ifstream m("/sys/devices/system/cpu/cpu0/regs/identification/midr_el1");
  std::string midr_text;
  if (m >> midr_text) midr = std::strtoull(midr_text.c_str(), nullptr, 16);
#endif
  s.cpu_model = CpuModelFromCpuinfo(cpuinfo, midr);
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

double MeasureRate(const std::function<uint64_t()>& work, double budget_seconds) {
  using Clock = std::chrono::steady_clock;
  double best = 0;
  const Clock::time_point end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                   std::chrono::duration<double>(budget_seconds));
  for (int pass = 0; pass < 3 || Clock::now() < end; ++pass) {
    const Clock::time_point t0 = Clock::now();
    const uint64_t units = work();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s > 0) best = std::max(best, static_cast<double>(units) / s);
    if (pass > 1000) break;
  }
  return best;
}

}  // namespace needle::report
