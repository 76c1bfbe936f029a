// A small pool for "parallel for over chunks" without a join barrier: the caller works too, and
// workers take chunks from a shared counter, so a descheduled worker (busy machine) costs at most
// the chunk it holds instead of stalling every region (OpenMP's static split + barrier did).
// Which thread runs a chunk varies; what a chunk computes does not, so results are identical for
// any thread count. Run() allocates nothing.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

namespace needle::kernels {

class ChunkPool {
 public:
  // threads - 1 workers are started (threads <= 1: everything runs on the caller).
  explicit ChunkPool(int threads);
  ~ChunkPool();
  ChunkPool(const ChunkPool&) = delete;
  ChunkPool& operator=(const ChunkPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(chunk) for every chunk in [0, chunks) and returns when all are done. Not
  // reentrant: one Run at a time per pool (the pool belongs to one decoder).
  template <class Fn>
  void Run(size_t chunks, const Fn& fn) {
    RunErased(
        chunks, &fn, [](const void* f, size_t c) { (*static_cast<const Fn*>(f))(c); }, false);
  }

  // Calls fn(part, chunk) for every part in [0, threads()) and chunk in [0, chunks_per_part),
  // and returns when all are done. Thread k (the caller is 0) runs part k's chunks first, in
  // order, so region after region the same thread meets the same part of the data (it stays in
  // that core's cache); a thread out of chunks of its own takes the next unstarted chunk of the
  // other parts (a descheduled or slower worker delays the region by at most a chunk).
  template <class Fn>
  void RunPinned(size_t chunks_per_part, const Fn& fn) {
    RunErased(
        chunks_per_part, &fn,
        [](const void* f, size_t c) {
          (*static_cast<const Fn*>(f))(c >> kPartShift, c & ((size_t{1} << kPartShift) - 1));
        },
        true);
  }
  // fn(part) for every part in [0, threads()): one chunk per part.
  template <class Fn>
  void RunPinned(const Fn& fn) {
    RunPinned(1, [&fn](size_t part, size_t) { fn(part); });
  }

  // A side task: fn() starts on a worker that is free now (or when it finishes its chunk) and
  // runs beside the caller, which may Run() meanwhile; Join() returns once it has run, running it
  // on the caller if no worker took it (always so without workers). One side task at a time; fn
  // must not use the pool and must live until Join(). Which thread runs it varies, what it
  // computes does not.
  template <class Fn>
  void Post(const Fn& fn) {
    PostErased(&fn, [](const void* f) { (*static_cast<const Fn*>(f))(); });
  }
  void Join();

 private:
  using Call = void (*)(const void* fn, size_t chunk);
  using SideCall = void (*)(const void* fn);
  void RunErased(size_t chunks, const void* fn, Call call, bool pinned);
  void PostErased(const void* fn, SideCall call);
  // Runs the posted side task if nobody has taken it yet.
  void TakeSide();
  void WorkerLoop(size_t self);
  // Takes and runs chunks of generation `gen` until none are left (a pinned job: thread `self`'s
  // part first). Returns chunks run.
  size_t Drain(uint32_t gen, size_t self);
  // Claims the next chunk of part `part` of the pinned job of generation `gen`; false once the
  // part has none left or the job is over.
  bool ClaimPart(uint32_t gen, size_t part, size_t chunks, size_t* chunk);

  // A pinned job's chunk (part, chunk) reaches its Call as (part << kPartShift) | chunk.
  static constexpr unsigned kPartShift = 24;

  std::vector<std::thread> workers_;
  std::atomic<uint32_t> generation_{0};  // bumped per Run; workers wait on it
  std::atomic<uint64_t> next_{0};        // (generation << 32) | next chunk index
  std::atomic<size_t> done_{0};          // chunks finished in this generation
  // Pinned jobs: per part, (generation << 32) | next chunk, each on its own cache line.
  struct alignas(64) PartNext {
    std::atomic<uint64_t> next{0};
  };
  std::unique_ptr<PartNext[]> part_next_;
  // The job of generation g lives in jobs_[g & 1]: a worker that read generation g can only
  // ever see g's job there (job g+2 cannot start before every chunk of g+1, hence of g, is
  // claimed, and its claim checks the generation).
  struct Job {
    std::atomic<size_t> chunks{0};
    std::atomic<const void*> fn{nullptr};
    std::atomic<Call> call{nullptr};
    std::atomic<bool> pinned{false};
  };
  Job jobs_[2];
  std::atomic<bool> stop_{false};
  // The side task: kSideNone, kSidePosted (fn / call set), kSideTaken, kSideDone. Post wakes the
  // workers by advancing generation_ by 2: a generation without a job keeps next_'s stamp of the
  // last job (so no chunk can be claimed under it) and jobs keep alternating slots.
  static constexpr int kSideNone = 0, kSidePosted = 1, kSideTaken = 2, kSideDone = 3;
  std::atomic<int> side_state_{kSideNone};
  const void* side_fn_ = nullptr;
  SideCall side_call_ = nullptr;
};

}  // namespace needle::kernels
