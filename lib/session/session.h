// A conversation with a Needle 2 model: renders the prompt (tools prefix pinned as KV sinks),
// keeps a prefix snapshot so fresh queries only compute their own turn, and runs the decoding
// loop. Decoding is greedy; the token choice goes through a TokenFilter so the grammar-
// constrained protocol (PROTOCOL.md section 3) slots in without touching the loop.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "format/cact.h"
#include "model/decoder.h"
#include "text/prompt.h"
#include "text/tokenizer.h"

namespace needle::session {

// Decides which tokens may come next: once per step it marks the allowed ids, and the loop takes
// the highest-logit allowed token (one call per step, not per vocabulary entry). No filter =
// unconstrained greedy decoding.
class TokenFilter {
 public:
  virtual ~TokenFilter() = default;
  virtual void BeginTurn() = 0;
  // allowed[id] = 1 if id may be emitted now, else 0 (allowed.size() == vocab).
  virtual void AllowedMask(std::span<uint8_t> allowed) = 0;
  virtual void Commit(int32_t id) = 0;
};

struct SessionConfig {
  int threads = 1;
  uint32_t kv_window = 0;  // 0 = the header's kv_window
  const kernels::KernelTable* kernels = nullptr;
};

// Why a turn stopped.
enum class StopReason { kEos, kImEnd, kBudget, kNoCandidate };
const char* StopReasonName(StopReason r);

struct TurnResult {
  std::vector<int32_t> turn_ids;       // the rendered turn that was prefilled
  std::vector<int32_t> generated_ids;  // committed tokens (including a final EOS/<|im_end|>)
  std::string text;                    // decoded generated text (special markers included)
  StopReason stop = StopReason::kBudget;
  double prefill_seconds = 0, decode_seconds = 0;
  double prefill_tps = 0, decode_tps = 0;  // turn tokens / prefill time; generated / decode time
};

class Session {
 public:
  // `file` must outlive the session. Renders and prefills the prefix for (system, tools_json)
  // and snapshots it. Throws InvalidInput for invalid tools JSON.
  Session(const format::CactFile& file, const SessionConfig& config, std::string_view system,
          std::string_view tools_json);

  const std::vector<int32_t>& prefix_ids() const { return prefix_ids_; }
  const std::string& tools_text() const { return tools_text_; }
  const text::Tokenizer& tokenizer() const { return tokenizer_; }
  const text::PromptRenderer& renderer() const { return renderer_; }
  double prefix_seconds() const { return prefix_seconds_; }

  // Back to the state right after the prefix.
  void Reset();

  // A fresh query (first turn after the prefix): restores the prefix snapshot, prefills the turn
  // and decodes greedily up to `max_tokens` committed tokens, EOS or <|im_end|>.
  TurnResult Complete(std::string_view query, int max_tokens, TokenFilter* filter = nullptr);

 private:
  TurnResult Decode(std::vector<int32_t> turn_ids, int max_tokens, TokenFilter* filter);

  const format::CactFile& file_;
  text::Tokenizer tokenizer_;
  text::PromptRenderer renderer_;
  model::Model model_;
  std::string tools_text_;
  std::vector<int32_t> prefix_ids_;
  std::unique_ptr<model::Decoder> decoder_;
  model::Snapshot prefix_snapshot_;
  std::vector<float> logits_;
  std::vector<uint8_t> allowed_;  // [vocab] scratch for the filter's mask
  double prefix_seconds_ = 0;
};

}  // namespace needle::session
