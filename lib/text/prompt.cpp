// Prompt rendering (format in prompt.h, spec PROTOCOL.md section 1).
#include "text/prompt.h"

#include "base/error.h"
#include "text/json_text.h"

namespace needle::text {

ChatTokens ChatTokens::Resolve(const Tokenizer& tok) {
  auto find = [&](std::string_view spelling) {
    const int32_t id = tok.PieceToId(spelling);
    if (id < 0) {
      Fail<FormatError>("tokenizer has no piece '{}' (needed by the chat protocol)", spelling);
    }
    return id;
  };
  ChatTokens t;
  t.bos = tok.bos_id();
  t.eos = tok.eos_id();
  t.im_start = find("<|im_start|>");
  t.im_end = find("<|im_end|>");
  t.think = find("<think>");
  t.think_end = find("</think>");
  t.tools = find("<tools>");
  t.tools_end = find("</tools>");
  t.tool_call = find("<tool_call>");
  t.tool_call_end = find("</tool_call>");
  t.tool_result = find("<tool_result>");
  t.tool_result_end = find("</tool_result>");
  return t;
}

std::string RenderToolsText(std::string_view tools_json, std::string_view what) {
  constexpr std::string_view kBom = "\xEF\xBB\xBF";  // a UTF-8 byte order mark is skipped
  if (tools_json.substr(0, kBom.size()) == kBom) tools_json.remove_prefix(kBom.size());
  std::string minified = StripJsonWhitespace(tools_json);
  if (!minified.empty()) ValidateJson(tools_json, what);
  return minified;
}

std::string PrefixText(std::string_view system, std::string_view tools_text) {
  std::string s;
  if (!system.empty()) {
    s += "<|im_start|>system\n";
    s += system;
    s += "<|im_end|>\n";
  }
  s += "<|im_start|>user";
  if (!tools_text.empty()) {
    s += "\n<tools>";
    s += tools_text;
    s += "</tools>";
  }
  return s;
}

std::string FirstTurnText(std::string_view query) {
  std::string s = "\n";
  s += query;
  s += "<|im_end|>\n<|im_start|>assistant\n";
  return s;
}

std::string UserTurnText(std::string_view query) {
  std::string s = "\n<|im_start|>user\n";
  s += query;
  s += "<|im_end|>\n<|im_start|>assistant\n";
  return s;
}

std::string ToolResultPayload(std::string_view result, size_t num_tools) {
  if (num_tools > kMaxRenderedTools) return std::string(result);
  std::string r = StripJsonWhitespace(result);
  if (!r.empty() && r.front() == '{') r = "[" + r + "]";
  return r;
}

std::string ToolResultTurnText(std::string_view result, size_t num_tools) {
  std::string s = "\n<|im_start|>tool\n<tool_result>";
  s += ToolResultPayload(result, num_tools);
  s += "</tool_result><|im_end|>\n<|im_start|>assistant\n";
  return s;
}

std::vector<int32_t> PromptRenderer::PrefixIds(std::string_view system,
                                               std::string_view tools_text) const {
  std::vector<int32_t> ids{tokens_.bos};
  tokenizer_.EncodeAppend(PrefixText(system, tools_text), tokenizer_.add_dummy_prefix(), &ids);
  return ids;
}

std::vector<int32_t> PromptRenderer::FirstTurnIds(std::string_view query) const {
  return tokenizer_.Encode(FirstTurnText(query), false);
}

std::vector<int32_t> PromptRenderer::UserTurnIds(std::string_view query) const {
  return tokenizer_.Encode(UserTurnText(query), false);
}

std::vector<int32_t> PromptRenderer::ToolResultTurnIds(std::string_view result,
                                                       size_t num_tools) const {
  return tokenizer_.Encode(ToolResultTurnText(result, num_tools), false);
}

}  // namespace needle::text
