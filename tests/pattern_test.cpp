// grammar/pattern.h: the schema-pattern automaton against std::regex (ECMAScript, the dialect JSON
// Schema uses) on random strings, its prefix pruning, and the regular formats.
#include "grammar/pattern.h"

#include <catch2/catch.hpp>
#include <random>
#include <regex>
#include <string>
#include <vector>

using needle::grammar::kOtherChar;
using needle::grammar::Pattern;
using needle::grammar::PatternSet;

namespace {

// Feeds `s`; -1 if a prefix was pruned (its length otherwise irrelevant), else 1 / 0 = matches.
int Run(const Pattern& p, const std::string& s, size_t* pruned_at = nullptr) {
  PatternSet set = p.Start();
  for (size_t i = 0; i < s.size(); ++i) {
    if (!p.Step(set, static_cast<uint8_t>(s[i]))) {
      if (pruned_at) *pruned_at = i;
      return -1;
    }
  }
  return p.Accepts(set) ? 1 : 0;
}

}  // namespace

TEST_CASE("pattern automaton: the strings std::regex_search matches, and no pruned one does",
          "[grammar][pattern]") {
  const std::vector<std::string> patterns = {"^[a-z]+$",
                                             "^\\d{3}-\\d{4}$",
                                             "ab|cd",
                                             "^(ab|a)c?$",
                                             "x{2,3}y",
                                             "^[^0-9]*$",
                                             "^\\w+@\\w+\\.com$",
                                             "^(?:[A-F0-9]{2}:)+$",
                                             "^a.c$",
                                             "^[-+]?\\d*\\.?\\d+$",
                                             "colou?r",
                                             "^\\s*\\S+\\s*$",
                                             "^[a-c]{2,}?$",
                                             "^(a|b)*abb$",
                                             "\\.",
                                             "^[\\]\\-x]+$",
                                             "^$",
                                             "^[A-Z][a-z]{0,4}$"};
  const std::string alphabet = "abcdxyABCF0123456789-+.@:_ \t]\\com";
  std::mt19937 rng(3);
  size_t checked = 0, matched = 0, pruned = 0;
  for (const std::string& pat : patterns) {
    INFO(pat);
    const auto p = Pattern::Compile(pat);
    REQUIRE(p.has_value());
    const std::regex re(pat, std::regex::ECMAScript);
    for (int k = 0; k < 3000; ++k) {
      std::string s;
      const int len = static_cast<int>(rng() % 9);
      for (int i = 0; i < len; ++i) s += alphabet[rng() % alphabet.size()];
      // Bias half of the strings towards the pattern's own characters.
      if (k % 2 == 0)
        for (char& c : s)
          if (rng() % 2) c = pat[rng() % pat.size()];
      INFO("'" << s << "'");
      const bool expect = std::regex_search(s, re);
      const int got = Run(*p, s);
      CHECK((got == 1) == expect);
      matched += expect;
      pruned += got == -1;
      ++checked;
    }
  }
  CHECK(checked == patterns.size() * 3000);
  CHECK(matched > 1000);  // both outcomes are well represented
  CHECK(pruned > 1000);
}

TEST_CASE("pattern automaton: what it does not support is refused, never guessed",
          "[grammar][pattern]") {
  for (const char* bad : {"(a", "a)", "[ab", "\\1", "(?=a)", "a\\b", "x^y", "a$b", "*a", "a{3,1}",
                          "\\p{L}", "caf\xc3\xa9"})
    CHECK_FALSE(Pattern::Compile(bad).has_value());
  // Non-ASCII characters are one symbol: `.` and negated classes take it, literals cannot exist.
  const auto p = Pattern::Compile("^.[^a]$");
  REQUIRE(p);
  PatternSet s = p->Start();
  CHECK(p->Step(s, kOtherChar));
  CHECK(p->Step(s, kOtherChar));
  CHECK(p->Accepts(s));
  // Deep nesting (recursion in the parser) and too many states are unsupported too.
  CHECK_FALSE(Pattern::Compile(std::string(100000, '(') + "a" + std::string(100000, ')')));
  CHECK(Pattern::Compile(std::string(30, '(') + "a" + std::string(30, ')')).has_value());
  CHECK_FALSE(Pattern::Compile("^((a{64}){64}){64}$").has_value());
  CHECK_FALSE(Pattern::Compile("^(abcdefgh){40}$").has_value());
}

TEST_CASE("pattern automaton: the regular formats", "[grammar][pattern]") {
  auto ok = [](const char* format, const std::string& s) {
    const auto p = Pattern::ForFormat(format);
    REQUIRE(p);
    return Run(*p, s) == 1;
  };
  CHECK(ok("date", "2026-12-02"));
  CHECK_FALSE(ok("date", "2026-13-02"));
  CHECK_FALSE(ok("date", "2026-12-2"));
  CHECK_FALSE(ok("date", "2026-02-30"));
  CHECK_FALSE(ok("date", "2026-04-31"));
  CHECK(ok("date", "2024-02-29"));
  CHECK(ok("date", "2000-02-29"));
  CHECK_FALSE(ok("date", "1900-02-29"));
  CHECK_FALSE(ok("date", "2026-02-29"));
  CHECK(ok("time", "23:59:60.5Z"));
  CHECK(ok("time", "08:30:00+05:30"));
  CHECK_FALSE(ok("time", "08:30:00"));  // RFC 3339 full-time needs an offset
  CHECK(ok("date-time", "2026-12-02T10:59:00Z"));
  CHECK(ok("date-time", "2028-02-29t23:59:59.999-08:00"));
  CHECK_FALSE(ok("date-time", "2026-12-02 10:59:00Z"));
  CHECK(ok("email", "a.b@example.org"));
  CHECK_FALSE(ok("email", "a b@example.org"));
  CHECK_FALSE(ok("email", "@example.org"));
  CHECK(ok("uuid", "123e4567-e89b-12d3-a456-426614174000"));
  CHECK_FALSE(ok("uuid", "123e4567-e89b-12d3-a456-42661417400"));
  CHECK(ok("ipv4", "192.168.0.255"));
  CHECK_FALSE(ok("ipv4", "192.168.0.256"));
  CHECK_FALSE(ok("ipv4", "192.168.00.1"));
  CHECK_FALSE(Pattern::ForFormat("uri").has_value());
}
