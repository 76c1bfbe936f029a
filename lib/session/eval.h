// Exact-call scoring for `needle eval`: a reply's function calls against the expected ones.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace needle::session {

// One function call as scored: its name and its arguments (a JSON object).
struct Call {
  std::string name;
  nlohmann::json arguments = nlohmann::json::object();
};

// Parses a calls array `[{"name": "...", "arguments": {...}}, ...]` (`arguments` may be left out:
// no arguments; other keys are errors). Throws InvalidInput naming `what` and the call's index.
std::vector<Call> ParseCalls(std::string_view text, std::string_view what);

// Exact-call match: the same number of calls and, in some order, each with the same name and
// equal arguments (compared as JSON values: key order and number spelling do not matter, 5
// equals 5.0; strings must be identical).
bool SameCalls(const std::vector<Call>& a, const std::vector<Call>& b);

// The calls as a JSON array [{"name", "arguments"}] (for reports; keys in that order).
nlohmann::ordered_json CallsJson(const std::vector<Call>& calls);

}  // namespace needle::session
