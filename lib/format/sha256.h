// SHA-256 (FIPS 180-4) for file and tensor fingerprints; streaming and one-shot.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace needle::format {

class Sha256 {
 public:
  Sha256();
  void Update(std::span<const uint8_t> data);
  std::string HexDigest();  // finalizes; 64 lowercase hex characters

 private:
  void Block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  uint64_t len_ = 0;  // bytes fed
  uint32_t fill_ = 0;
};

std::string Sha256Hex(std::span<const uint8_t> data);

}  // namespace needle::format
