// Shared helpers for tests: fixture paths, temp dirs, running the needle CLI and capturing output.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <sstream>
#include <string>
#include <vector>

namespace needle::testing {

// (Appended in place: GCC 12's -Warray-bounds misreads string(literal) + "/" + rel once inlined.)
// Golden session sets (tests/session_test.cpp, session_v2_test.cpp) check every case in the
// ordinary build and every fourth case in the sanitizer build (10-15x slower; the same code paths
// over a quarter of the turns: scripts/test-sanitizers.sh).
#ifdef NEEDLE_SANITIZED
inline constexpr size_t kSanitizerCaseStride = 4;
#else
inline constexpr size_t kSanitizerCaseStride = 1;
#endif
// CLI tests that start a process per case (the same command over different inputs) check every
// third case in the sanitizer build, where each process takes seconds (an ASan `needle run` ~18x
// a release one), and every case otherwise.
#ifdef NEEDLE_SANITIZED
inline constexpr size_t kSanitizerCliStride = 3;
#else
inline constexpr size_t kSanitizerCliStride = 1;
#endif

inline std::string DataPath(const std::string& rel) {
  std::string path = NEEDLE_TEST_DATA;
  path += '/';
  path += rel;
  return path;
}
inline std::string ModelPath(const std::string& name) { return DataPath("models/" + name); }
#ifdef NEEDLE_EXAMPLES_DIR  // (needle_tests; not the WASM kernel-test build)
// A file of the repository's examples/ (the trained demo model and its tools).
inline std::string ExamplePath(const std::string& name) {
  return std::string(NEEDLE_EXAMPLES_DIR) + "/" + name;
}
#endif

// The lines of a text (a last line without its newline included).
inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Resident kilobytes of the mapping that contains `p` (/proc/self/smaps), or -1 if not found.
inline long ResidentKbOfMapping(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto addr = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long lo = 0, hi = 0;  // a mapping's first line: "lo-hi perms offset ..."
    if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) == 2 && line.find('-') < line.find(' ')) {
      inside = addr >= lo && addr < hi;
    } else if (inside && line.rfind("Rss:", 0) == 0) {
      return std::stol(line.substr(4));
    }
  }
  return -1;
}

// Bytes of the whole pages inside [p, p + n) that this process has mapped in (the present bit of
// /proc/self/pagemap; mincore would report the page cache, which pread also fills), or -1 if
// pagemap cannot be read.
inline long ResidentBytesOfRange(const void* p, size_t n) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto addr = reinterpret_cast<uintptr_t>(p);
  const uintptr_t first = (addr + page - 1) / page, last = (addr + n) / page;
  if (last <= first) return 0;
  std::vector<uint64_t> entries(last - first);
  const int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  const auto bytes = static_cast<ssize_t>(entries.size() * sizeof(uint64_t));
  const ssize_t got = ::pread(fd, entries.data(), entries.size() * sizeof(uint64_t),
                              static_cast<off_t>(first * sizeof(uint64_t)));
  ::close(fd);
  if (got != bytes) return -1;
  long resident = 0;
  for (uint64_t e : entries) resident += (e >> 63) ? static_cast<long>(page) : 0;
  return resident;
}

// Reads one byte of every 4 KiB page of `bytes` (a mapping's pages become resident), returning
// their sum so the reads cannot be dropped.
inline unsigned TouchPages(std::span<const uint8_t> bytes) {
  unsigned sum = 0;
  for (size_t i = 0; i < bytes.size(); i += 4096)
    sum += *static_cast<const volatile uint8_t*>(&bytes[i]);
  return sum;
}

inline std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

inline void WriteBytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// A fresh temporary directory removed on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "needle-test-XXXXXX").string();
    char* p = ::mkdtemp(tmpl.data());
    path_ = p ? p : "";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

// Runs a /bin/sh command line whose stdout and stderr go to `out` and `err` (files the caller
// names in the command), then reads them back.
inline CliResult RunCaptured(const std::string& cmd, const std::string& out,
                             const std::string& err) {
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  auto o = ReadBytes(out), e = ReadBytes(err);
  r.out.assign(o.begin(), o.end());
  r.err.assign(e.begin(), e.end());
  return r;
}

// Runs `program` with `args` (shell-quoted here), capturing stdout and stderr.
inline CliResult RunProgram(const std::string& program, const std::vector<std::string>& args,
                            const std::string& stdin_text = "") {
  TempDir tmp;
  std::string cmd = "'" + program + "'";
  for (const auto& a : args) {
    std::string q = "'";
    for (char c : a) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
    cmd += " " + q + "'";
  }
  const std::string in = tmp / "stdin", out = tmp / "stdout", err = tmp / "stderr";
  WriteBytes(in, std::vector<uint8_t>(stdin_text.begin(), stdin_text.end()));
  cmd += " <'" + in + "' >'" + out + "' 2>'" + err + "'";
  return RunCaptured(cmd, out, err);
}

// Runs the built `needle` binary.
inline CliResult RunCli(const std::vector<std::string>& args, const std::string& stdin_text = "") {
  return RunProgram(NEEDLE_BINARY, args, stdin_text);
}

// The T stored at byte `at` of `b` / stores v there (file headers and records in tests).
template <class T>
T GetAt(const std::vector<uint8_t>& b, size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof(T));
  return v;
}
template <class T>
void PutAt(std::vector<uint8_t>* b, size_t at, T v) {
  std::memcpy(b->data() + at, &v, sizeof(T));
}

inline uint32_t FloatBits(float f) { return std::bit_cast<uint32_t>(f); }

// Same length and the same bits (not ==: -0.0 and NaN payloads count).
inline bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace needle::testing
