// Chooses the kernel table from the CPU's features (CPUID via the compiler's builtins, which also
// check that the OS saves the AVX state).
#include "kernels/dispatch.h"

#include <atomic>

#include "base/error.h"

namespace needle::kernels {

namespace {

const KernelTable kScalar{"scalar", &CqGemmReference};
#if defined(NEEDLE_X86)
const KernelTable kAvx2{"avx2", &CqGemmAvx2};

bool CpuHasAvx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("f16c");
}
#endif

std::atomic<const KernelTable*> g_active{nullptr};

}  // namespace

const KernelTable& ReferenceKernels() { return kScalar; }

std::vector<std::string> AvailableIsas() {
  std::vector<std::string> isas{"scalar"};
#if defined(NEEDLE_X86)
  if (CpuHasAvx2()) isas.push_back("avx2");
#endif
  return isas;
}

const KernelTable& KernelsFor(const std::string& isa) {
  if (isa == "scalar") return kScalar;
#if defined(NEEDLE_X86)
  if (isa == "avx2") {
    if (!CpuHasAvx2()) Fail<UsageError>("--isa avx2: this CPU lacks AVX2/FMA/F16C");
    return kAvx2;
  }
#endif
  Fail<UsageError>("--isa {}: unknown or not built for this architecture", isa);
}

const KernelTable& ActiveKernels() {
  const KernelTable* t = g_active.load(std::memory_order_acquire);
  if (t) return *t;
  const KernelTable& best = KernelsFor(AvailableIsas().back());
  g_active.store(&best, std::memory_order_release);
  return best;
}

void SelectIsa(const std::string& isa) { g_active.store(&KernelsFor(isa)); }

}  // namespace needle::kernels
