// One request line of a JSONL file (needle run --batch, needle eval):
//   {"query": "...", "tools": [...], "system": "...", "max_tokens": N, "expected": [...]}
// Only "query" is required; "expected" belongs to eval files. The tools and expected arrays are
// kept as written (whitespace outside strings removed), as a --tools file would be.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace needle::session {

struct Request {
  std::string query;
  std::optional<std::string> tools;     // the tools array's text (absent: the caller's default)
  std::optional<std::string> system;    // absent: the caller's default
  std::optional<int64_t> max_tokens;    // >= 0; absent: the caller's default
  std::optional<std::string> expected;  // the expected calls array's text (eval)
};

// Parses one line. `with_expected`: "expected" is a known key and required (eval), else an
// unknown one. Throws InvalidInput with a message naming what is wrong: invalid JSON, not an
// object, a missing or duplicate key, an unknown key, a value of the wrong JSON type, a negative
// max_tokens.
Request ParseRequest(std::string_view line, bool with_expected);

}  // namespace needle::session
