// A small regular-expression automaton for schema `pattern` and `format` (only under
// CompatOptions::enforce_value_limits): a Thompson NFA of at most kMaxPatternStates states whose
// state set fits in a grammar frame, so a string value can be pruned character by character (no
// prefix that no completion can match) and its closing quote refused until it matches.
// Characters are ASCII code points; every non-ASCII character is one symbol (kOtherChar), which
// `.`, negated classes and \D \W \S match. Supported syntax (ECMA-262 as JSON Schema uses it,
// search semantics: unanchored unless the pattern starts with ^ / ends with $): literals, `.`,
// classes with ranges and negation, \d \D \w \W \s \S and escaped punctuation, groups `( )` and
// `(?: )`, `|`, `* + ?` and `{n} {n,} {n,m}` (lazy forms match the same strings). Anything else
// (backreferences, lookaround, \b, inner anchors, non-ASCII literals, too many states) makes
// Compile return nothing: the value is then not pruned.
#pragma once

#include <array>
#include <bitset>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace needle::grammar {

inline constexpr size_t kMaxPatternStates = 256;
inline constexpr uint32_t kOtherChar = 128;  // the symbol of every non-ASCII character

// A set of NFA states (bit i = state i), closed under empty moves.
struct PatternSet {
  std::array<uint64_t, kMaxPatternStates / 64> bits{};
  bool empty() const {
    for (const uint64_t b : bits)
      if (b) return false;
    return true;
  }
};

class Pattern {
 public:
  static std::optional<Pattern> Compile(std::string_view regex);
  // The formats with a regular shape: date, time, date-time (RFC 3339), email (something@something
  // without spaces), uuid, ipv4 (no leading zeros); nothing for the others.
  static std::optional<Pattern> ForFormat(std::string_view format);

  PatternSet Start() const { return start_; }
  // One character (an ASCII code point, or kOtherChar); false when no state is left (the value
  // can no longer match, whatever follows).
  bool Step(PatternSet& s, uint32_t c) const;
  bool Accepts(const PatternSet& s) const { return (s.bits[0] & 1) != 0; }  // state 0 = match
  size_t states() const { return states_.size(); }

 private:
  struct State {
    int16_t set = -1;  // character set index (-1: the match or a split state)
    int16_t out = -1;  // the state after the character
  };
  friend class PatternBuilder;
  std::vector<State> states_;
  std::vector<std::bitset<kOtherChar + 1>> sets_;
  std::vector<PatternSet> closure_;  // per state: the states reachable through empty moves
  PatternSet start_;
};

}  // namespace needle::grammar
