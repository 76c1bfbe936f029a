// Runtime CPU feature detection (CPUID + OS register-state support) and the ISA level kernels
// may use, with an override so tests and benchmarks can force any compiled path.
#pragma once

#include <optional>
#include <string_view>

namespace needle::kernels {

// What the CPU and the OS support. Every flag already includes the OS check (XGETBV: the OS
// saves the YMM / ZMM state), so a true flag means instructions of that set are safe to run.
struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  // AVX512_VNNI (vpdpbusd / vpdpwssd on zmm): not an ISA level of its own; the avx512 kernel table
  // uses it inside when present. AVX-VNNI (the VEX form) is detected for information.
  bool avx512vnni = false, avxvnni = false;
  // AVX512_VBMI (vpermb): used by the avx512 table's CQ gemm when present with AVX512_VNNI.
  bool avx512vbmi = false;
  // AArch64: Advanced SIMD (mandatory) and the dot-product extension (SDOT/UDOT, ARMv8.2
  // optional, ARMv8.4 mandatory; Linux HWCAP_ASIMDDP).
  bool neon = false, dotprod = false;
  // WebAssembly SIMD128: every wasm build has it (compiled with -msimd128; a runtime without it
  // refuses the module), no native build does.
  bool simd128 = false;
};

// Detected once (thread-safe static); all false on CPUs / builds without support.
const CpuFeatures& GetCpuFeatures();

// ISA levels in increasing order within each architecture's family: x86 kAvx2 (AVX2 + FMA +
// F16C) < kAvx512 (F, BW, VL, DQ plus kAvx2's sets); AArch64 kNeon (Advanced SIMD) < kDotprod
// (plus SDOT); WebAssembly kSimd128 alone. A level of another family is never supported
// (IsaSupported); the order across families means nothing.
enum class Isa : int { kScalar = 0, kNeon = 1, kDotprod = 2, kAvx2 = 3, kAvx512 = 4, kSimd128 = 5 };

// "scalar", "neon", "dotprod", "avx2", "avx512", "simd128"
const char* IsaName(Isa isa);
std::optional<Isa> ParseIsa(std::string_view name);  // inverse of IsaName, plus "auto" -> best

// The best ISA this CPU supports (among those compiled for this architecture).
Isa BestIsa();

// True if `isa` is scalar or a level of this build's family at or below BestIsa().
bool IsaSupported(Isa isa);

// The ISA kernels dispatch to: BestIsa(), or lower if limited by SetIsaLimit. Cheap (one relaxed
// atomic load); kernels may call it per invocation.
Isa ActiveIsa();

// Limits dispatch to `isa` (clamped to BestIsa()). Returns the level actually in effect. Not for
// use while other threads run kernels whose results must not change mid-way.
Isa SetIsaLimit(Isa isa);

}  // namespace needle::kernels
