// Prompt rendering exactly as the official engine does it (PROTOCOL.md section 1): the prefix
// (prefilled once, the KV sinks) and each turn, as text and as token ids.
//
//   prefix      [BOS] + encode_dummy(S), S = ("<|im_start|>system\n{system}<|im_end|>\n" if system
//               is non-empty) + "<|im_start|>user" + ("\n<tools>{T}</tools>" if T is non-empty)
//   first turn  encode_nodummy("\n{query}<|im_end|>\n<|im_start|>assistant\n")
//   user turn   encode_nodummy("\n<|im_start|>user\n{query}<|im_end|>\n<|im_start|>assistant\n")
//   tool result encode_nodummy("\n<|im_start|>tool\n<tool_result>{R}</tool_result><|im_end|>\n"
//                              "<|im_start|>assistant\n")
// T = the tools JSON with whitespace outside strings deleted (never re-serialized). R = the result
// minified the same way and, if it then starts with '{', wrapped in [ ]: with at most 5 tools;
// with more than 5 tools R is the raw text. encode_dummy uses the model's add_dummy_prefix.
// Text that spells a chat marker becomes the marker's id (user-defined pieces match anywhere).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer.h"

namespace needle::text {

// More tools than this: the engine renders a retrieval-selected subset of this many tools.
inline constexpr size_t kMaxRenderedTools = 5;

// Ids of the special tokens the protocol uses, resolved by spelling from the vocabulary.
struct ChatTokens {
  int32_t bos = -1, eos = -1;
  int32_t im_start = -1, im_end = -1;
  int32_t think = -1, think_end = -1;
  int32_t tools = -1, tools_end = -1;
  int32_t tool_call = -1, tool_call_end = -1;
  int32_t tool_result = -1, tool_result_end = -1;

  // Throws FormatError naming the missing marker (e.g. "<|im_end|>") if the vocabulary lacks one.
  static ChatTokens Resolve(const Tokenizer& tokenizer);
};

// --- Text forms (for --print-prompt and tests) ---
// The tools text T: whitespace outside strings deleted. Validates `tools_json` as JSON first
// (InvalidInput "<what>: invalid JSON: ..."); an empty or all-whitespace text means "no tools".
// A leading UTF-8 byte order mark is skipped.
std::string RenderToolsText(std::string_view tools_json, std::string_view what = "tools");
// S, without BOS. `tools_text` is T (already minified).
std::string PrefixText(std::string_view system, std::string_view tools_text);
std::string FirstTurnText(std::string_view query);
std::string UserTurnText(std::string_view query);
// `num_tools`: size of the tool inventory (decides minify+wrap vs raw).
std::string ToolResultTurnText(std::string_view result, size_t num_tools);
// R as rendered inside <tool_result>...</tool_result>.
std::string ToolResultPayload(std::string_view result, size_t num_tools);

// --- Token ids ---
class PromptRenderer {
 public:
  explicit PromptRenderer(const Tokenizer& tokenizer)
      : tokenizer_(tokenizer), tokens_(ChatTokens::Resolve(tokenizer)) {}
  // Holds a reference: copying or moving it next to a moved Tokenizer would dangle.
  PromptRenderer(const PromptRenderer&) = delete;
  PromptRenderer& operator=(const PromptRenderer&) = delete;

  const Tokenizer& tokenizer() const { return tokenizer_; }
  const ChatTokens& tokens() const { return tokens_; }

  // [BOS] + encode_dummy(PrefixText(system, tools_text)); `tools_text` is T.
  std::vector<int32_t> PrefixIds(std::string_view system, std::string_view tools_text) const;
  std::vector<int32_t> FirstTurnIds(std::string_view query) const;
  std::vector<int32_t> UserTurnIds(std::string_view query) const;
  std::vector<int32_t> ToolResultTurnIds(std::string_view result, size_t num_tools) const;

 private:
  const Tokenizer& tokenizer_;  // must outlive the renderer
  ChatTokens tokens_;
};

}  // namespace needle::text
