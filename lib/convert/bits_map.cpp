// Bits-map parsing and longest-prefix lookup.
#include "convert/bits_map.h"

#include <cctype>

#include "base/error.h"

namespace needle::convert {

namespace {

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

uint32_t ParseWidth(const std::string& spec, const std::string& entry, const std::string& v) {
  if (v == "1.58" || v == "ternary") return 5;
  if (v == "2" || v == "3" || v == "4") return static_cast<uint32_t>(v[0] - '0');
  Fail<UsageError>(
      "bits map '{}': entry '{}' has width '{}'; expected 2, 3, 4, or 1.58 "
      "(ternary)",
      spec, entry, v);
}

// Upstream spells per-layer tensors "attn.<name>" for every layer.
std::string UpstreamSpelling(const std::string& name) {
  if (name.size() > 8 && name.compare(0, 5, "layer") == 0 && name[7] == '.' &&
      std::isdigit(static_cast<unsigned char>(name[5])) &&
      std::isdigit(static_cast<unsigned char>(name[6])))
    return "attn." + name.substr(8);
  return name;
}

}  // namespace

BitsMap BitsMap::Parse(const std::string& spec) {
  BitsMap m;
  m.spec_ = spec;
  bool have_default = false;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    const std::string entry = Trim(spec.substr(pos, comma - pos));
    pos = comma + 1;
    if (entry.empty()) continue;
    const size_t eq = entry.find('=');
    if (eq == std::string::npos)
      Fail<UsageError>("bits map '{}': entry '{}' is not <name>=<bits>", spec, entry);
    const std::string key = Trim(entry.substr(0, eq));
    const uint32_t bits = ParseWidth(spec, entry, Trim(entry.substr(eq + 1)));
    if (key.empty()) Fail<UsageError>("bits map '{}': entry '{}' has no name", spec, entry);
    if (key == "default") {
      m.default_bits_ = bits;
      have_default = true;
    } else {
      m.entries_.emplace_back(key, bits);  // a later duplicate key wins (found first below)
    }
  }
  if (!have_default) Fail<UsageError>("bits map '{}' needs a default=<bits> entry", spec);
  return m;
}

uint32_t BitsMap::BitsFor(const std::string& name) const {
  const std::string alias = UpstreamSpelling(name);
  size_t best_len = 0;
  uint32_t bits = default_bits_;
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    const std::string& key = it->first;
    const bool hit =
        name.compare(0, key.size(), key) == 0 || alias.compare(0, key.size(), key) == 0;
    if (hit && key.size() > best_len) {
      best_len = key.size();
      bits = it->second;
    }
  }
  return bits;
}

}  // namespace needle::convert
