// The text `needle --version` prints.
#pragma once

#include <string>

namespace needle::cli {

// "needle X.Y.Z" then one line each: commit, compiler, build type, ISAs compiled / usable.
std::string VersionText();
// The git commit the build was configured from ("unknown" outside a checkout) and the build type.
std::string GitCommit();
std::string BuildType();

}  // namespace needle::cli
