// Checks that a decode step allocates nothing on the heap after warm-up. Its own executable
// because it replaces the global operator new/delete with counting versions.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "format/cact.h"
#include "model/decoder.h"

// GCC cannot see that these replacements pair malloc with free consistently.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace {
std::atomic<long> g_allocations{0};
}

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace {

// Returns the number of heap allocations made by `steps` decode steps after warm-up.
long CountStepAllocations(const std::string& model_path, int threads, const char* isa) {
  const auto file = needle::format::CactFile::Open(model_path);
  const needle::model::Model model(file);
  needle::model::DecoderConfig cfg;
  cfg.kv_window = 16;  // small, so the steps below wrap the ring
  cfg.sink_len = 8;
  cfg.pool_heads = true;  // probe pooling runs in the step too
  cfg.threads = threads;
  cfg.kernels = &needle::kernels::KernelsFor(isa);
  needle::model::Decoder dec(model, cfg);
  std::vector<int32_t> prefix(20);
  for (size_t i = 0; i < prefix.size(); ++i) prefix[i] = static_cast<int32_t>(17 + 31 * i);
  std::vector<float> logits(model.geometry().vocab);
  dec.Prefill(prefix, logits);
  for (int i = 0; i < 2; ++i) dec.Step(100 + i, logits);  // warm-up (OpenMP thread pool)
  const long before = g_allocations.load();
  for (int i = 0; i < 30; ++i) dec.Step(200 + 7 * i, logits);
  return g_allocations.load() - before;
}

}  // namespace

int main() {
  // The counter must see allocations, or a zero below would mean nothing.
  const long probe = g_allocations.load();
  void* p = ::operator new(64);
  asm volatile("" : : "r"(p) : "memory");
  ::operator delete(p);
  if (g_allocations.load() - probe < 1) {
    std::fprintf(stderr, "counting allocator is not active\n");
    return 1;
  }
  int failures = 0;
  for (const char* model : {"tiny.cact", "small.cact"}) {
    for (const std::string& isa : needle::kernels::AvailableIsas()) {
      for (int threads : {1, 2}) {
        const long n = CountStepAllocations(std::string(NEEDLE_TEST_DATA) + "/models/" + model,
                                            threads, isa.c_str());
        std::printf("%s isa %s threads %d: %ld heap allocations in 30 decode steps\n", model,
                    isa.c_str(), threads, n);
        if (n != 0) ++failures;
      }
    }
  }
  return failures == 0 ? 0 : 1;
}
