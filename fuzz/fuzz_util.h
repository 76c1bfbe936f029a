// Shared helpers of the libFuzzer targets (scripts/fuzz.sh): fixture paths and the rule that the
// library's typed errors (base/error.h) are expected results, never crashes.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "base/error.h"

#ifndef NEEDLE_TEST_DATA
#error "NEEDLE_TEST_DATA must name tests/data"
#endif

namespace needle::fuzz {

inline std::string DataPath(const std::string& rel) {
  return std::string(NEEDLE_TEST_DATA) + "/" + rel;
}

inline std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "fuzz: cannot read %s\n", path.c_str());
    std::abort();
  }
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs f(); a needle::Error (IoError, FormatError, InvalidInput, UsageError) is a rejected input.
// Anything else escapes and libFuzzer reports it as a crash.
template <class F>
void ExpectErrors(F&& f) {
  try {
    f();
  } catch (const needle::Error&) {
  }
}

}  // namespace needle::fuzz
