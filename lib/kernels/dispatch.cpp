// Chooses the kernel table from the ISA level of kernels/cpu_features.h (CPUID + OS state
// checks), so the FWHT and the CQ products always follow the same --isa limit.
#include "kernels/dispatch.h"

#include "base/error.h"
#include "kernels/cpu_features.h"
#include "kernels/cq_int8_x86.h"
#if defined(NEEDLE_ARM)
#include "kernels/arm/kernels_arm.h"
#endif
#if defined(NEEDLE_WASM)
#include "kernels/wasm/kernels_wasm.h"
#endif

namespace needle::kernels {

namespace {

const KernelTable kScalar{
    "scalar",           &CqGemmReference,    &CqQuantizeI8Reference, &CqGemmI8Reference,
    &DotI8Reference,    &ExpfArrayReference, &LogfArrayReference,    &QuantizeI8,
    &AttendI8Reference, &SinkhornReference,  &DotI8RowsReference,    &MacPeakReference};
#if defined(NEEDLE_X86)
const KernelTable kAvx2{"avx2",        &CqGemmAvx2,    &CqQuantizeI8Avx2, &CqGemmI8Avx2,
                        &DotI8Avx2,    &ExpfArrayAvx2, &LogfArrayAvx2,    &QuantizeI8Avx2,
                        &AttendI8Avx2, &SinkhornAvx2,  &DotI8RowsAvx2,    &MacPeakAvx2};

// AVX512_VNNI (and with it AVX512_VBMI) is used inside the avx512 table when the CPU has it (same
// activation layout, same bits); it is not a level of its own, so --isa avx512 keeps meaning
// F/BW/VL/DQ CPUs.
const KernelTable& Avx512Table() {
  static const KernelTable table =
      GetCpuFeatures().avx512vnni
          ? KernelTable{"avx512",
                        &CqGemmAvx512,
                        &CqQuantizeI8Avx512,
                        GetCpuFeatures().avx512vbmi ? &CqGemmI8Avx512Vbmi : &CqGemmI8Avx512Vnni,
                        &DotI8Avx512Vnni,
                        &ExpfArrayAvx512,
                        &LogfArrayAvx512,
                        &QuantizeI8Avx512,
                        &AttendI8Avx512Vnni,
                        &SinkhornAvx512,
                        &DotI8RowsAvx512Vnni,
                        &MacPeakAvx512Vnni,
                        /*cq_i8_tiles=*/CqTileLayout::kRowDwords,
                        /*attend_split_heads=*/true,
                        &AttendI8BlockAvx512Vnni}
          : KernelTable{"avx512",
                        &CqGemmAvx512,
                        &CqQuantizeI8Avx512,
                        &CqGemmI8Avx512,
                        &DotI8Avx512,
                        &ExpfArrayAvx512,
                        &LogfArrayAvx512,
                        &QuantizeI8Avx512,
                        &AttendI8Avx512,
                        &SinkhornAvx512,
                        &DotI8RowsVia<DotI8Avx512>,
                        &MacPeakAvx512,
                        /*cq_i8_tiles=*/CqTileLayout::kNone,
                        /*attend_split_heads=*/false};
  return table;
}
#endif
#if defined(NEEDLE_ARM)
// Both ARM tables quantize activations into one layout (I8LayoutPositionArm); the f32 CQ product
// is the scalar reference's for now.
const KernelTable kNeon{"neon",        &CqGemmReference, &CqQuantizeI8Neon,        &CqGemmI8Neon,
                        &DotI8Neon,    &ExpfArrayNeon,   &LogfArrayNeon,           &QuantizeI8Neon,
                        &AttendI8Neon, &SinkhornNeon,    &DotI8RowsVia<DotI8Neon>, &MacPeakNeon};
const KernelTable kDotprod{"dotprod",
                           &CqGemmReference,
                           &CqQuantizeI8Neon,
                           &CqGemmI8Dotprod,
                           &DotI8Dotprod,
                           &ExpfArrayNeon,
                           &LogfArrayNeon,
                           &QuantizeI8Neon,
                           &AttendI8Dotprod,
                           &SinkhornNeon,
                           &DotI8RowsVia<DotI8Dotprod>,
                           &MacPeakDotprod};
#endif
#if defined(NEEDLE_WASM)
// Activations in the wasm layout (I8LayoutPositionWasm); the f32 CQ product is the scalar
// reference's.
const KernelTable kSimd128{"simd128",
                           &CqGemmReference,
                           &CqQuantizeI8Simd128,
                           &CqGemmI8Simd128,
                           &DotI8Simd128,
                           &ExpfArraySimd128,
                           &LogfArraySimd128,
                           &QuantizeI8Simd128,
                           &AttendI8Simd128,
                           &SinkhornSimd128,
                           &DotI8RowsVia<DotI8Simd128>,
                           &MacPeakSimd128,
                           /*cq_i8_tiles=*/CqTileLayout::kByteColumns};
#endif

// The table for an ISA level this CPU supports.
const KernelTable& TableFor(Isa isa) {
#if defined(NEEDLE_X86)
  if (isa >= Isa::kAvx512) return Avx512Table();
  if (isa >= Isa::kAvx2) return kAvx2;
#endif
#if defined(NEEDLE_ARM)
  if (isa == Isa::kDotprod) return kDotprod;
  if (isa == Isa::kNeon) return kNeon;
#endif
#if defined(NEEDLE_WASM)
  if (isa == Isa::kSimd128) return kSimd128;
#endif
  (void)isa;
  return kScalar;
}

}  // namespace

const KernelTable& ReferenceKernels() { return kScalar; }

std::vector<std::string> CompiledIsas() {
  std::vector<std::string> isas{"scalar"};
#if defined(NEEDLE_X86)
  isas.push_back("avx2");
  isas.push_back("avx512");
#endif
#if defined(NEEDLE_ARM)
  isas.push_back("neon");
  isas.push_back("dotprod");
#endif
#if defined(NEEDLE_WASM)
  isas.push_back("simd128");
#endif
  return isas;
}

std::vector<std::string> AvailableIsas() {
  std::vector<std::string> isas{"scalar"};
#if defined(NEEDLE_X86)
  if (BestIsa() >= Isa::kAvx2) isas.push_back("avx2");
  if (BestIsa() >= Isa::kAvx512) isas.push_back("avx512");
#endif
#if defined(NEEDLE_ARM)
  if (IsaSupported(Isa::kNeon)) isas.push_back("neon");
  if (IsaSupported(Isa::kDotprod)) isas.push_back("dotprod");
#endif
#if defined(NEEDLE_WASM)
  if (IsaSupported(Isa::kSimd128)) isas.push_back("simd128");
#endif
  return isas;
}

const KernelTable& KernelsFor(const std::string& isa) {
  const std::optional<Isa> level = ParseIsa(isa);
  if (!level)
    Fail<UsageError>("--isa {}: unknown ISA (scalar, avx2, avx512, neon, dotprod, simd128, auto)",
                     isa);
  if (!IsaSupported(*level))
    Fail<UsageError>("--isa {}: not supported by this CPU or build (best: {})", isa,
                     IsaName(BestIsa()));
  return TableFor(*level);
}

const KernelTable& ActiveKernels() { return TableFor(ActiveIsa()); }

void SelectIsa(const std::string& isa) {
  KernelsFor(isa);  // validates
  SetIsaLimit(*ParseIsa(isa));
}

}  // namespace needle::kernels
