// IEEE 754 half <-> float conversion (round-to-nearest-even), bit exact with numpy's float16.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace needle {

inline float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// n little-endian halves at src -> dst, the same bits as F16ToF32 on each, without branches (so
// the loop vectorizes): the magnitude bits moved to the float position and scaled by 2^112 (exact
// for normal and subnormal halves: the product is a normal float), an all-ones exponent (infinity,
// NaN with its payload) set directly, then the sign. Needs IEEE subnormals (no DAZ / FTZ).
inline void F16ToF32Span(const uint8_t* src, size_t n, float* dst) {
  for (size_t i = 0; i < n; ++i) {
    uint16_t h16;
    std::memcpy(&h16, src + 2 * i, 2);
    const uint32_t h = h16;
    const uint32_t magnitude = (h & 0x7fffu) << 13;
    float scaled;
    std::memcpy(&scaled, &magnitude, 4);
    scaled *= 0x1p112f;
    uint32_t bits;
    std::memcpy(&bits, &scaled, 4);
    const uint32_t special = (h & 0x7c00u) == 0x7c00u ? 0xffffffffu : 0u;
    bits = (bits & ~special) | ((magnitude | 0x7f800000u) & special);
    bits |= (h & 0x8000u) << 16;
    std::memcpy(dst + i, &bits, 4);
  }
}

inline uint16_t F32ToF16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan
    return sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u | ((abs >> 13) & 0x3ffu) : 0u);
  }
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: overflow to inf
  if (abs < 0x38800000u) {                        // result is subnormal or zero
    if (abs < 0x33000000u) return sign;           // < 2^-25 rounds to 0
    const uint32_t e = abs >> 23;
    const uint32_t m = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14..24
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return sign | static_cast<uint16_t>(r);
  }
  uint32_t r = ((abs >> 13) - ((127 - 15) << 10));
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return sign | static_cast<uint16_t>(r);
}

// Reads a little-endian value of type T from possibly unaligned memory.
template <class T>
inline T LoadLE(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace needle
