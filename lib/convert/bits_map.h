// Per-tensor CQ widths from a spec like "embedding=4,mhc=4,default=2" (upstream parse_bits_map).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace needle::convert {

// Record-bits values: 2, 3, 4, or 5 = ternary (written "1.58" or "ternary" in a spec).
class BitsMap {
 public:
  // Parses comma-separated name=width entries; `default=` is mandatory (as upstream: a model's
  // numerics must never come from a silent fallback). Throws UsageError naming the bad entry.
  static BitsMap Parse(const std::string& spec);

  // Width for a canonical tensor name: the value of the longest key that is a prefix of the name
  // or of its upstream spelling ("layer03.q_proj" is also matched as "attn.q_proj"), else default.
  uint32_t BitsFor(const std::string& name) const;

  const std::string& spec() const { return spec_; }

 private:
  std::string spec_;
  std::vector<std::pair<std::string, uint32_t>> entries_;
  uint32_t default_bits_ = 0;
};

// The exporter's default scheme.
inline constexpr const char* kDefaultScheme = "embedding=4,mhc=4,default=2";

}  // namespace needle::convert
