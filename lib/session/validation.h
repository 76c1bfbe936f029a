// The reply's `validation` block (ENGINE-PROTOCOL.md section 4, confirmed on the engine): which
// generated argument values do not occur in the query, and whether the query negates.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "grammar/schema.h"

namespace needle::session {

struct Validation {
  std::vector<std::string> ungrounded;  // "tool.arg", in generation order
  bool negation = false;
};

// The engine's comparison form: ASCII letters lower-cased, ' ', '-' and '_' deleted.
std::string GroundingForm(std::string_view s);

// `calls_json`: a successful, non-empty call array as generated. Top-level argument values only:
// strings (normalized length >= 3) and numbers (trailing fraction zeros and '.' dropped, length
// >= 1) are flagged when their form is not a substring of the form of `said` (every input since
// the conversation's reset, tool results included); enum/const arguments, booleans, null, arrays
// and objects are skipped. Negation looks at this turn's `query` only (measured on the engine: a
// tool-result turn's call grounded by the first turn's words is not flagged, and that turn's
// "don't" does not set negation).
Validation Validate(std::string_view calls_json, std::string_view said, std::string_view query,
                    const grammar::CallSchema& schema);

// Negation: the lower-cased query contains one of the engine's ten phrases, not followed (after
// spaces) by worry / hesitate / forget / mind.
bool QueryNegates(std::string_view query);

}  // namespace needle::session
