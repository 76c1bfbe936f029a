// CPUID / XGETBV based feature detection and the process-wide ISA limit.
#include "kernels/cpu_features.h"

#include <atomic>

#if defined(NEEDLE_X86)
#include <cpuid.h>
#elif defined(NEEDLE_ARM) && defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

namespace needle::kernels {
namespace {

#if defined(NEEDLE_X86)
// XCR0 bits: 1 SSE, 2 AVX (YMM upper halves), 5-7 AVX-512 (opmask, ZMM 0-15 upper, ZMM 16-31).
constexpr unsigned kXcr0Avx = (1u << 1) | (1u << 2);
constexpr unsigned kXcr0Avx512 = kXcr0Avx | (1u << 5) | (1u << 6) | (1u << 7);

unsigned long long ReadXcr0() {
  unsigned eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<unsigned long long>(edx) << 32) | eax;
}

CpuFeatures Detect() {
  CpuFeatures f;
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool osxsave = (ecx >> 27) & 1;
  const bool avx = (ecx >> 28) & 1;
  const bool fma = (ecx >> 12) & 1;
  const bool f16c = (ecx >> 29) & 1;
  if (!osxsave || !avx) return f;
  const unsigned long long xcr0 = ReadXcr0();
  if ((xcr0 & kXcr0Avx) != kXcr0Avx) return f;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return f;
  f.avx2 = (ebx >> 5) & 1;
  f.fma = fma;
  f.f16c = f16c;
  if ((xcr0 & kXcr0Avx512) == kXcr0Avx512) {
    f.avx512f = (ebx >> 16) & 1;
    f.avx512dq = (ebx >> 17) & 1;
    f.avx512bw = (ebx >> 30) & 1;
    f.avx512vl = (ebx >> 31) & 1;
    f.avx512vnni = f.avx512f && ((ecx >> 11) & 1);
    f.avx512vbmi = f.avx512f && ((ecx >> 1) & 1);
  }
  unsigned eax1, ebx1, ecx1, edx1;
  if (eax >= 1 && __get_cpuid_count(7, 1, &eax1, &ebx1, &ecx1, &edx1))
    f.avxvnni = f.avx2 && ((eax1 >> 4) & 1);
  return f;
}
#else
CpuFeatures Detect() {
  CpuFeatures f;
#if defined(NEEDLE_ARM) && defined(__aarch64__)
  f.neon = true;  // Advanced SIMD is mandatory on AArch64
#if defined(__linux__)
  // The kernel reports what EL0 may execute (Linux uapi asm/hwcap.h: HWCAP_ASIMDDP = 1 << 20).
  constexpr unsigned long kHwcapAsimdDp = 1ul << 20;
  f.dotprod = (getauxval(AT_HWCAP) & kHwcapAsimdDp) != 0;
#endif
#endif
#if defined(NEEDLE_WASM)
  f.simd128 = true;  // the module is compiled with -msimd128: it runs only where SIMD128 does
#endif
  return f;
}
#endif

Isa Best(const CpuFeatures& f) {
  if (f.avx2 && f.fma && f.f16c) {
    if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq) return Isa::kAvx512;
    return Isa::kAvx2;
  }
  if (f.neon) return f.dotprod ? Isa::kDotprod : Isa::kNeon;
  if (f.simd128) return Isa::kSimd128;
  return Isa::kScalar;
}

// The architecture family of a level (kScalar belongs to every family).
enum class Family { kAny, kX86, kArm, kWasm };
Family FamilyOf(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return Family::kAny;
    case Isa::kNeon:
    case Isa::kDotprod:
      return Family::kArm;
    case Isa::kAvx2:
    case Isa::kAvx512:
      return Family::kX86;
    case Isa::kSimd128:
      return Family::kWasm;
  }
  return Family::kAny;
}

std::atomic<int> g_limit{-1};  // -1: no limit

}  // namespace

const CpuFeatures& GetCpuFeatures() {
  static const CpuFeatures features = Detect();
  return features;
}

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kNeon:
      return "neon";
    case Isa::kDotprod:
      return "dotprod";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kSimd128:
      return "simd128";
  }
  return "?";
}

std::optional<Isa> ParseIsa(std::string_view name) {
  if (name == "auto") return BestIsa();
  for (Isa isa :
       {Isa::kScalar, Isa::kNeon, Isa::kDotprod, Isa::kAvx2, Isa::kAvx512, Isa::kSimd128}) {
    if (name == IsaName(isa)) return isa;
  }
  return std::nullopt;
}

Isa BestIsa() {
  static const Isa best = Best(GetCpuFeatures());
  return best;
}

bool IsaSupported(Isa isa) {
  const Isa best = BestIsa();
  if (isa == Isa::kScalar) return true;
  return FamilyOf(isa) == FamilyOf(best) && isa <= best;
}

Isa ActiveIsa() {
  const int limit = g_limit.load(std::memory_order_relaxed);
  const Isa best = BestIsa();
  if (limit < 0 || limit >= static_cast<int>(best)) return best;
  const Isa limited = static_cast<Isa>(limit);
  // A level of another architecture's family (NEON on x86, AVX2 below dotprod...) means scalar.
  return FamilyOf(limited) == FamilyOf(best) ? limited : Isa::kScalar;
}

Isa SetIsaLimit(Isa isa) {
  g_limit.store(static_cast<int>(isa), std::memory_order_relaxed);
  return ActiveIsa();
}

}  // namespace needle::kernels
