// A one-line progress bar on stderr for long conversions; silent unless stderr is a terminal
// and the log level shows info lines (not under --quiet).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace needle::report {

// Not thread-safe: call from one thread. Redraws at most ~10 times a second.
class Progress {
 public:
  // `total` is in caller units (tensors, bytes); `enabled` defaults to isatty(stderr) and
  // report::LogEnabled("info").
  Progress(std::string label, uint64_t total);
  Progress(std::string label, uint64_t total, bool enabled);
  ~Progress();  // clears the line if not finished
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void Advance(uint64_t n = 1) { Set(done_ + n); }
  void Set(uint64_t done);
  void Finish();  // draws 100% and ends the line

  bool enabled() const { return enabled_; }
  // The bar text for a state, e.g. "dequant [#######.............]  35% 142/405".
  static std::string Render(const std::string& label, uint64_t done, uint64_t total, int width);

 private:
  void Draw();

  std::string label_;
  uint64_t total_, done_ = 0;
  bool enabled_, finished_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace needle::report
