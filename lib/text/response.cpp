// Splitting a generated turn into reasoning, calls and free text (format in response.h).
#include "text/response.h"

#include "base/error.h"

namespace needle::text {

namespace {

constexpr std::string_view kThink = "<think>";
constexpr std::string_view kThinkEnd = "</think>";
constexpr std::string_view kToolCall = "<tool_call>";
constexpr std::string_view kToolCallEnd = "</tool_call>";
constexpr std::string_view kImEnd = "<|im_end|>";
constexpr std::string_view kEos = "</s>";

bool IsAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Removes a trailing end marker; returns whether one was there.
bool StripEnd(std::string_view* s) {
  for (std::string_view end : {kImEnd, kEos}) {
    if (s->ends_with(end)) {
      s->remove_suffix(end.size());
      return true;
    }
  }
  return false;
}

}  // namespace

std::string_view TrimAscii(std::string_view s) {
  while (!s.empty() && IsAsciiSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsAsciiSpace(s.back())) s.remove_suffix(1);
  return s;
}

std::optional<std::string> ParsedResponse::reasoning() const {
  if (auto t = TrimAscii(think); !t.empty()) return std::string(t);
  if (auto t = TrimAscii(free_text); !t.empty()) return std::string(t);
  return std::nullopt;
}

ParsedResponse ParseResponse(std::string_view text) {
  ParsedResponse r;
  r.calls = nlohmann::json::array();
  std::string_view rest = text;
  // Generation may stop right after an end marker; anything after it is not part of the turn.
  for (std::string_view end : {kImEnd, kEos}) {
    if (const size_t at = rest.find(end); at != std::string_view::npos) {
      rest = rest.substr(0, at + end.size());
    }
  }
  r.ended = StripEnd(&rest);

  const std::string_view lead = TrimAscii(rest);
  if (lead.starts_with(kThink)) {
    rest = lead.substr(kThink.size());
    const size_t close = rest.find(kThinkEnd);
    if (close == std::string_view::npos) {
      r.think = std::string(rest);
      return r;
    }
    r.think_closed = true;
    r.think = std::string(rest.substr(0, close));
    rest = rest.substr(close + kThinkEnd.size());
  }
  const std::string_view after_think = TrimAscii(rest);
  if (!after_think.starts_with(kToolCall)) {
    r.free_text = std::string(rest);
    return r;
  }
  r.has_tool_call = true;
  rest = after_think.substr(kToolCall.size());
  const size_t close = rest.find(kToolCallEnd);
  if (close == std::string_view::npos) {
    r.calls_text = std::string(rest);
    r.calls = nullptr;
    return r;
  }
  r.call_closed = true;
  r.calls_text = std::string(rest.substr(0, close));
  const std::string_view trailing = TrimAscii(rest.substr(close + kToolCallEnd.size()));
  if (!trailing.empty()) {
    Fail<InvalidInput>("response: unexpected text after </tool_call>: '{}'",
                       trailing.substr(0, 60));
  }
  try {
    r.calls = nlohmann::json::parse(r.calls_text);
  } catch (const nlohmann::json::exception& e) {
    Fail<InvalidInput>("response: tool call is not valid JSON ({}): '{}'", e.what(),
                       std::string_view(r.calls_text).substr(0, 120));
  }
  if (!r.calls.is_array()) {
    Fail<InvalidInput>("response: tool call must be a JSON array, got {}", r.calls.type_name());
  }
  for (size_t i = 0; i < r.calls.size(); ++i) {
    const auto& c = r.calls[i];
    if (!c.is_object() || !c.contains("name") || !c["name"].is_string() ||
        !c.contains("arguments") || !c["arguments"].is_object()) {
      Fail<InvalidInput>(
          "response: call {} is not an object with a string \"name\" and an object "
          "\"arguments\": {}",
          i, c.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    }
  }
  return r;
}

}  // namespace needle::text
