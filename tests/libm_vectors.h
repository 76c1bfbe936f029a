// The engine's libm results recorded by scripts/official/make_libm_vectors*.py: a file is an 8-byte
// magic, then per function a record set: name[8] (NUL-padded), arity u32, count u32, then count
// records of (arity inputs, result), each a `word_bytes` little-endian float (f32 or f64).
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "test_util.h"

namespace needle::testing {

struct LibmVectorSet {
  std::string name;
  uint32_t arity = 0;
  uint32_t count = 0;
  std::vector<uint8_t> records;  // count * (arity + 1) words
};

// Every record set of tests/data/`rel`; fails the test on a wrong magic or a truncated set.
inline std::vector<LibmVectorSet> ReadLibmVectors(const std::string& rel, const char (&magic)[9],
                                                  size_t word_bytes) {
  const std::vector<uint8_t> bytes = ReadBytes(DataPath(rel));
  REQUIRE(bytes.size() > 8);
  REQUIRE(std::memcmp(bytes.data(), magic, 8) == 0);
  std::vector<LibmVectorSet> sets;
  size_t pos = 8;
  while (pos < bytes.size()) {
    REQUIRE(pos + 16 <= bytes.size());
    LibmVectorSet set;
    const char* name = reinterpret_cast<const char*>(bytes.data() + pos);
    set.name.assign(name, strnlen(name, 8));
    std::memcpy(&set.arity, bytes.data() + pos + 8, 4);
    std::memcpy(&set.count, bytes.data() + pos + 12, 4);
    pos += 16;
    REQUIRE((set.arity == 1 || set.arity == 2));
    const size_t n = word_bytes * (set.arity + 1) * size_t{set.count};
    REQUIRE(pos + n <= bytes.size());
    set.records.assign(bytes.begin() + static_cast<std::ptrdiff_t>(pos),
                       bytes.begin() + static_cast<std::ptrdiff_t>(pos + n));
    pos += n;
    sets.push_back(std::move(set));
  }
  return sets;
}

}  // namespace needle::testing
