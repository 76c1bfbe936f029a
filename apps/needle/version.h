// The text `needle --version` prints.
#pragma once

#include <string>

namespace needle::cli {

// "needle X.Y.Z" then one line each: commit, compiler, build type, ISAs compiled / usable.
std::string VersionText();

}  // namespace needle::cli
