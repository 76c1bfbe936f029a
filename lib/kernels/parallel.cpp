// ChunkPool (parallel.h): workers spin briefly for the next job, then sleep on a futex
// (std::atomic::wait); chunks are claimed with a compare-exchange that also checks the job's
// generation, so a late worker never runs a chunk of a job that has finished.
#include "kernels/parallel.h"

#include <algorithm>

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
  part_next_.reset(new PartNext[static_cast<size_t>(std::max(threads, 1))]);
  for (int i = 1; i < threads; ++i)
    workers_.emplace_back([this, i] { WorkerLoop(static_cast<size_t>(i)); });
}

ChunkPool::~ChunkPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& w : workers_) w.join();
}

bool ChunkPool::ClaimPart(uint32_t gen, size_t part, size_t chunks, size_t* chunk) {
  std::atomic<uint64_t>& next = part_next_[part].next;
  uint64_t v = next.load(std::memory_order_acquire);
  for (;;) {
    if (static_cast<uint32_t>(v >> 32) != gen) return false;  // that job is over
    *chunk = static_cast<size_t>(v & 0xffffffffu);
    if (*chunk >= chunks) return false;
    if (next.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel)) return true;
  }
}

size_t ChunkPool::Drain(uint32_t gen, size_t self) {
  const Job& job = jobs_[gen & 1];
  const size_t chunks = job.chunks.load(std::memory_order_acquire);
  const void* fn = job.fn.load(std::memory_order_acquire);
  const Call call = job.call.load(std::memory_order_acquire);
  size_t ran = 0;
  if (job.pinned.load(std::memory_order_acquire)) {
    const size_t parts = static_cast<size_t>(threads());
    for (size_t k = 0; k < parts; ++k) {
      const size_t part = (self + k) % parts;  // its own part first, then the others in turn
      size_t chunk = 0;
      while (ClaimPart(gen, part, chunks, &chunk)) {
        call(fn, (part << kPartShift) | chunk);
        ++ran;
      }
    }
    return ran;
  }
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

void ChunkPool::WorkerLoop(size_t self) {
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
    const size_t ran = Drain(gen, self);
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

void ChunkPool::RunErased(size_t chunks, const void* fn, Call call, bool pinned) {
  if (workers_.empty() || (!pinned && chunks <= 1)) {  // one part when pinned: part 0's chunks
    for (size_t c = 0; c < chunks; ++c) call(fn, c);
    return;
  }
  const size_t total = pinned ? chunks * static_cast<size_t>(threads()) : chunks;
  const uint32_t gen = generation_.load(std::memory_order_relaxed) + 1;
  Job& job = jobs_[gen & 1];
  job.chunks.store(chunks, std::memory_order_relaxed);
  job.fn.store(fn, std::memory_order_relaxed);
  job.call.store(call, std::memory_order_relaxed);
  job.pinned.store(pinned, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  if (pinned)
    for (size_t p = 0; p <= workers_.size(); ++p)
      part_next_[p].next.store(static_cast<uint64_t>(gen) << 32, std::memory_order_relaxed);
  next_.store(static_cast<uint64_t>(gen) << 32, std::memory_order_release);
  generation_.store(gen, std::memory_order_release);
  generation_.notify_all();
  size_t ran = Drain(gen, 0);
  // Wait for chunks claimed by workers. A worker that claimed one but was descheduled delays
  // us by that chunk only.
  while (done_.load(std::memory_order_acquire) + ran < total) CpuRelax();
}

}  // namespace needle::kernels
