// needle --version: version, the git commit the build was made from, compiler, build type
// and the kernel ISAs compiled in and usable on this CPU.
#include "version.h"

#include <fmt/format.h>

#include "kernels/cpu_features.h"
#include "kernels/dispatch.h"
#include "needle_git_commit.h"  // NEEDLE_GIT_COMMIT (cmake/git_commit.cmake, at build time)
#include "report/system.h"

#ifndef NEEDLE_GIT_COMMIT
#define NEEDLE_GIT_COMMIT "unknown"
#endif
#ifndef NEEDLE_BUILD_TYPE
#define NEEDLE_BUILD_TYPE "unknown"
#endif

namespace needle::cli {

std::string GitCommit() { return NEEDLE_GIT_COMMIT; }
std::string BuildType() { return NEEDLE_BUILD_TYPE; }

std::string VersionText() {
  const kernels::CpuFeatures& cpu = kernels::GetCpuFeatures();
  std::string usable = fmt::format("{}", fmt::join(kernels::AvailableIsas(), " "));
  // The avx512 table uses its VNNI / VBMI kernels inside when the CPU has them.
  if (kernels::BestIsa() >= kernels::Isa::kAvx512 && cpu.avx512vnni)
    usable += cpu.avx512vbmi ? " (avx512 with VNNI and VBMI)" : " (avx512 with VNNI)";
  return fmt::format(
      "needle {}\ncommit    {}\ncompiler  {}\nbuild     {}\nisas      compiled: {}\n"
      "          usable here: {}",
      NEEDLE_VERSION, NEEDLE_GIT_COMMIT, report::GetSystemInfo().compiler, NEEDLE_BUILD_TYPE,
      fmt::join(kernels::CompiledIsas(), " "), usable);
}

}  // namespace needle::cli
