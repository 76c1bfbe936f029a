// Progress bar drawing: carriage return + redraw, throttled.
#include "report/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "report/log.h"

namespace needle::report {

namespace {
constexpr int kBarWidth = 30;
constexpr auto kRedrawInterval = std::chrono::milliseconds(100);
}  // namespace

Progress::Progress(std::string label, uint64_t total)
    : Progress(std::move(label), total, ::isatty(STDERR_FILENO) == 1 && LogEnabled("info")) {}

Progress::Progress(std::string label, uint64_t total, bool enabled)
    : label_(std::move(label)), total_(total), enabled_(enabled) {}

Progress::~Progress() {
  if (enabled_ && !finished_) fmt::print(stderr, "\r\033[K");
}

std::string Progress::Render(const std::string& label, uint64_t done, uint64_t total, int width) {
  if (done > total) done = total;
  const double frac = total == 0 ? 1.0 : static_cast<double>(done) / static_cast<double>(total);
  const int filled = static_cast<int>(frac * width);
  return fmt::format("{} [{}{}] {:3d}% {}/{}", label, std::string(filled, '#'),
                     std::string(width - filled, '.'), static_cast<int>(frac * 100), done, total);
}

void Progress::Set(uint64_t done) {
  done_ = done;
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < kRedrawInterval && done_ < total_) return;
  last_draw_ = now;
  Draw();
}

void Progress::Draw() {
  fmt::print(stderr, "\r{}", Render(label_, done_, total_, kBarWidth));
  std::fflush(stderr);
}

void Progress::Finish() {
  if (finished_) return;
  finished_ = true;
  if (!enabled_) return;
  done_ = total_;
  Draw();
  fmt::print(stderr, "\n");
}

}  // namespace needle::report
