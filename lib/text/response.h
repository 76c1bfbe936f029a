// Parsing of a generated assistant turn:
//   [<think>REASONING</think>[\n]]<tool_call>[CALLS]</tool_call>[<|im_end|> | </s>]
// or free text (a respond turn): [<think>...</think>]TEXT[<|im_end|> | </s>].
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace needle::text {

struct ParsedResponse {
  std::string think;  // text between <think> and </think> (or to the end if unclosed)
  bool think_closed = false;
  bool has_tool_call = false;  // <tool_call> was generated
  bool call_closed = false;    // ... and </tool_call> followed the JSON
  std::string calls_text;      // the call JSON verbatim (between the markers)
  nlohmann::json calls;        // parsed calls: an array (empty if none); null if not closed
  std::string free_text;       // text after the think block when there is no tool call
  bool ended = false;          // <|im_end|> or </s> closed the turn

  // PROTOCOL.md section 4: the trimmed think text, else the trimmed free text, else nullopt.
  std::optional<std::string> reasoning() const;
};

// Splits a generated turn (decoded text, special tokens spelled out). Tolerates a missing think
// block. Throws InvalidInput when a closed tool call is not a JSON array of
// {"name": string, "arguments": object} objects (the message says what and where); an unclosed
// call (budget exhausted) is reported with call_closed = false instead. Never crashes on any input.
ParsedResponse ParseResponse(std::string_view generated);

// `s` without leading and trailing ASCII whitespace (space, \t, \n, \r, \f, \v).
std::string_view TrimAscii(std::string_view s);

}  // namespace needle::text
