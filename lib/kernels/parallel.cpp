// ChunkPool (parallel.h): workers spin briefly for the next job, then sleep on a futex
// (std::atomic::wait); chunks are claimed with a compare-exchange that also checks the job's
// generation, so a late worker never runs a chunk of a job that has finished.
#include "kernels/parallel.h"

#if defined(NEEDLE_X86)
#include <immintrin.h>
#endif

namespace needle::kernels {

namespace {

// Spin iterations before a worker sleeps: covers the gap between the regions of one token.
constexpr int kSpinBeforeSleep = 2000;

inline void CpuRelax() {
#if defined(NEEDLE_X86)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

ChunkPool::ChunkPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ChunkPool::~ChunkPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& w : workers_) w.join();
}

size_t ChunkPool::Drain(uint32_t gen) {
  const Job& job = jobs_[gen & 1];
  const size_t chunks = job.chunks.load(std::memory_order_acquire);
  const void* fn = job.fn.load(std::memory_order_acquire);
  const Call call = job.call.load(std::memory_order_acquire);
  size_t ran = 0;
  uint64_t v = next_.load(std::memory_order_acquire);
  for (;;) {
    if (static_cast<uint32_t>(v >> 32) != gen) break;  // that job is over
    const size_t chunk = static_cast<size_t>(v & 0xffffffffu);
    if (chunk >= chunks) break;
    if (!next_.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel)) continue;
    call(fn, chunk);
    ++ran;
  }
  return ran;
}

void ChunkPool::WorkerLoop() {
  uint32_t seen = 0;
  for (;;) {
    uint32_t gen = generation_.load(std::memory_order_acquire);
    for (int spin = 0; gen == seen && spin < kSpinBeforeSleep; ++spin) {
      CpuRelax();
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      continue;
    }
    seen = gen;
    if (stop_.load(std::memory_order_acquire)) return;
    TakeSide();
    const size_t ran = Drain(gen);
    if (ran) done_.fetch_add(ran, std::memory_order_acq_rel);
  }
}

void ChunkPool::TakeSide() {
  int expected = kSidePosted;
  if (side_state_.load(std::memory_order_acquire) != kSidePosted ||
      !side_state_.compare_exchange_strong(expected, kSideTaken, std::memory_order_acq_rel))
    return;
  side_call_(side_fn_);
  side_state_.store(kSideDone, std::memory_order_release);
}

void ChunkPool::PostErased(const void* fn, SideCall call) {
  side_fn_ = fn;
  side_call_ = call;
  side_state_.store(kSidePosted, std::memory_order_release);
  if (workers_.empty()) return;
  // Two steps keep the parity of the next job's generation (see side_state_).
  generation_.fetch_add(2, std::memory_order_acq_rel);
  generation_.notify_all();
}

void ChunkPool::Join() {
  if (side_state_.load(std::memory_order_acquire) == kSideNone) return;  // nothing posted
  TakeSide();
  while (side_state_.load(std::memory_order_acquire) != kSideDone) CpuRelax();
  side_state_.store(kSideNone, std::memory_order_relaxed);
}

void ChunkPool::RunErased(size_t chunks, const void* fn, Call call) {
  if (workers_.empty() || chunks <= 1) {
    for (size_t c = 0; c < chunks; ++c) call(fn, c);
    return;
  }
  const uint32_t gen = generation_.load(std::memory_order_relaxed) + 1;
  Job& job = jobs_[gen & 1];
  job.chunks.store(chunks, std::memory_order_relaxed);
  job.fn.store(fn, std::memory_order_relaxed);
  job.call.store(call, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  next_.store(static_cast<uint64_t>(gen) << 32, std::memory_order_release);
  generation_.store(gen, std::memory_order_release);
  generation_.notify_all();
  size_t ran = Drain(gen);
  // Wait for chunks claimed by workers. A worker that claimed one but was descheduled delays
  // us by that chunk only.
  while (done_.load(std::memory_order_acquire) + ran < chunks) CpuRelax();
}

}  // namespace needle::kernels
