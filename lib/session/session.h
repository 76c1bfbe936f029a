// A conversation with a Needle 2 model: renders the prompt (tools prefix pinned as KV sinks),
// keeps a prefix snapshot so fresh queries only compute their own turn, and runs the engine's turn
// protocol (PROTOCOL.md sections 2-5): <think>/<tool_call> choice, think phase, grammar-
// constrained tool calls, value-start branching, enum grounding, budget rules, conversation state,
// tool-result turns, confidence and the reply envelope. A plain greedy loop (optionally through a
// TokenFilter) is kept for `needle run --raw`.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "format/cact.h"
#include "grammar/call_grammar.h"
#include "model/decoder.h"
#include "session/embedder.h"
#include "session/logit_walk.h"
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

// Knobs of the engine's protocol (defaults = the official engine's measured constants).
struct ProtocolConfig {
  int think_reserve = 32;            // </think> forced when generated >= max_new_tokens - this
  int close_reserve = 4;             // a call-completing `]` forced with this many tokens left
  float branch_threshold = 0.95f;    // value-start branching when p(best) < this
  int branch_min_budget = 29;        // ... and at least this many tokens remain
  int branch_width = 4;              // candidates explored
  int branch_max_tokens = 24;        // tokens per explored value (first token included)
  double branch_open_penalty = 2.0;  // subtracted from the score of a branch that did not close
  double confidence_mass = 0.99;     // confidence walk: stop once this much mass was examined
  int confidence_walk = 24;          // ... or this many tokens after the first valid one
  float repetition_penalty = 1.3f;   // think / free text: logits of tokens already committed
  int enum_min_budget = 13;          // enum grounding needs this many tokens left (committed)
  grammar::CompatOptions compat;     // engine quirks reproduced by the grammar
  bool trace = false;                // log every decision at trace level (debugging)
  // The head part of the confidence from a full re-forward of the context every turn, as the
  // engine does under NEEDLE_CONF_RESCORE (otherwise only once its cached features are invalid).
  bool conf_rescore = false;
};

struct SessionConfig {
  int threads = 1;
  model::NumericPath numerics = model::NumericPath::kOfficial;
  // Folder of persisted tools-prefix snapshots (empty: none). The prefix state is loaded from
  // there when a file for the same model file (path, size, mtime), numerics, window, system and
  // tools exists, and written there after a prefill otherwise (model/snapshot_io.h).
  std::string prefix_cache_dir;
  uint32_t kv_window = 0;  // 0 = the header's kv_window
  const kernels::KernelTable* kernels = nullptr;
  // Reset() after a turn restores the tools prefix from a snapshot kept in memory (its KV: 1.5 MB
  // for a 94-token prefix at the official geometry). false: no snapshot is kept and Reset()
  // computes the prefix again (or reads the prefix cache): for one conversation per session
  // (needle run QUERY [NEXT...]), where it is never needed. Replies are the same either way.
  bool keep_prefix_state = true;
  ProtocolConfig protocol;
};

// Why a turn stopped.
enum class StopReason { kEos, kImEnd, kBudget, kNoCandidate, kCallDone };
const char* StopReasonName(StopReason r);

struct TurnResult {
  std::vector<int32_t> turn_ids;       // the rendered turn that was prefilled
  bool context_rebuilt = false;        // retrieval: turn_ids is the whole rebuilt context
  std::vector<int32_t> generated_ids;  // committed tokens (including a final EOS/<|im_end|>)
  std::string text;                    // decoded generated text (special markers included)
  StopReason stop = StopReason::kBudget;
  double prefill_seconds = 0, decode_seconds = 0;
  double prefill_tps = 0, decode_tps = 0;  // turn tokens / prefill time; generated / decode time
};

// One needle_complete: the protocol's outcome and the reply envelope fields.
struct Reply {
  TurnResult turn;
  int counted_tokens = 0;  // committed tokens, appended ones excluded (the engine's return value)
  std::string type = "respond";  // "call" iff `[` was generated
  bool success = true;
  std::optional<std::string> error, error_code, reason;
  std::string function_calls = "[]";  // JSON text, verbatim
  std::string calls_text;             // the call text as generated (even when truncated)
  std::string think_text;             // decoded think content (untrimmed)
  std::string free_text;              // decoded free text of a respond turn
  std::optional<std::string> reasoning;
  std::optional<double> confidence;                     // null for models without a confidence head
  double head_confidence = -1, decode_confidence = -1;  // Hc, Dc (-1 = not available)
  bool head_rescored = false;  // Hc from a full re-forward (the engine's cache was invalid)
  bool zero_tools = false;
  // validation (non-empty successful calls only)
  bool has_validation = false;
  std::vector<std::string> ungrounded;
  bool negation = false;
  double peak_ram_mb = 0;
  // The envelope JSON, keys in the engine's order and number formats (PROTOCOL.md section 4).
  std::string EnvelopeJson() const;
};

class Session {
 public:
  // `file` must outlive the session. Renders and prefills the prefix for (system, tools_json)
  // and snapshots it (see SessionConfig::keep_prefix_state). Throws InvalidInput for invalid tools
  // JSON.
  Session(const format::CactFile& file, const SessionConfig& config, std::string_view system,
          std::string_view tools_json);
  // The same on weights loaded once and shared by several sessions (`model` built from `file`;
  // read-only, so sessions on different threads may share it).
  Session(const format::CactFile& file, std::shared_ptr<const model::Model> model,
          const SessionConfig& config, std::string_view system, std::string_view tools_json);
  // Parts refer to others (the renderer and the grammar's token bytes to tokenizer_): not
  // copyable or movable (hold it in a unique_ptr to pass it around).
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const std::vector<int32_t>& prefix_ids() const { return prefix_ids_; }
  // Whether the prefix state came from the prefix cache (no prefill ran).
  bool prefix_from_cache() const { return prefix_from_cache_; }
  const std::string& tools_text() const { return tools_text_; }
  const text::Tokenizer& tokenizer() const { return tokenizer_; }
  const text::PromptRenderer& renderer() const { return renderer_; }
  double prefix_seconds() const { return prefix_seconds_; }
  size_t num_tools() const { return declared_tools_; }  // declared (not only rendered)

  // Whether more tools were declared than the prompt shows (text::kMaxRenderedTools): each user
  // turn then renders the ones the contrastive head finds closest to the query.
  bool retrieval() const { return retrieval_; }
  // The tools text a fresh turn with `query` renders (tools_text() without retrieval). Changes
  // nothing in the conversation.
  std::string ToolsTextFor(std::string_view query);

  // Back to the state right after the prefix (needle_reset): the conversation is forgotten.
  void Reset();

  // needle_complete: the next turn of the conversation (a user turn, or a tool-result turn when
  // the previous turn returned calls), decoded with the engine's protocol.
  Reply Respond(std::string_view input, int max_new_tokens);

  // Unconstrained (or filtered) greedy decoding of a fresh first turn, for --raw and tests:
  // restores the prefix snapshot, prefills the turn and decodes up to `max_tokens` tokens.
  TurnResult Complete(std::string_view query, int max_tokens, TokenFilter* filter = nullptr);

 private:
  struct TurnState;
  TurnResult Decode(std::vector<int32_t> turn_ids, int max_tokens, TokenFilter* filter);
  void Prefill(std::span<const int32_t> ids);
  void Feed(int32_t id);  // appends one token to the context; logits_ = the next distribution
  int32_t BestAllowed(const std::vector<uint8_t>& allowed) const;
  // The allowed id of the highest logit (the lowest id among equals); -1 if none is allowed.
  static int32_t BestAllowed(const std::vector<uint8_t>& allowed, std::span<const float> logits);
  double HeadConfidence(const std::vector<int32_t>& generated, bool* rescored);
  double CallTokenConfidence(const std::vector<uint8_t>& allowed,
                             const std::vector<uint8_t>& candidates);
  // The engine's candidate list for a call step in grammar state `gs` (the rows its forward
  // computes; every other logit is -1e30): text tokens whose first byte the grammar accepts
  // next, plus <|im_end|> and </tool_call>; all ones when that holds half the vocabulary.
  const std::vector<uint8_t>& CandidateList(const grammar::GrammarState& gs);
  int32_t PenalizedBest(const std::vector<uint8_t>& allowed,
                        const std::vector<uint8_t>& seen) const;
  void TraceStep(const char* what, const std::vector<uint8_t>& allowed, int counted) const;
  void DecodeCall(TurnState& t, bool require_call);
  void Finish(TurnState& t, Reply* reply);

  // Tool retrieval (more than text::kMaxRenderedTools tools, PROTOCOL.md section 1).
  void InitRetrieval();
  // Sets inventory_, tools_text_, grammar_ and prefix_ids_ to the tools retrieved for `query`;
  // false (nothing changed) when not `fresh` and the selection equals the current one.
  bool SelectTools(std::string_view query, bool fresh);
  std::vector<size_t> RetrieveTools(std::string_view query);  // indices, declaration order
  std::string ToolsTextOf(const std::vector<size_t>& chosen) const;

  const format::CactFile& file_;
  SessionConfig config_;
  // The model's tokenizer, built once per model (model::DerivedData) and shared by its sessions.
  std::shared_ptr<const text::Tokenizer> shared_tokenizer_;
  const text::Tokenizer& tokenizer_;
  text::PromptRenderer renderer_;
  std::shared_ptr<const model::Model> model_;
  std::string tools_text_;
  std::vector<std::string> inventory_;
  std::unique_ptr<grammar::CallGrammar> grammar_;
  std::unique_ptr<grammar::TokenConstraint> constraint_;
  std::vector<int32_t> prefix_ids_;
  std::unique_ptr<model::Decoder> decoder_;
  bool prefix_from_cache_ = false;
  std::string prefix_cache_key_;  // empty: no prefix cache
  uint32_t prefix_sink_len_ = 0;
  // Puts the decoder at the tools-prefix state: the prefix cache's file or a prefill (which
  // writes the file); keeps prefix_snapshot_ when config_.keep_prefix_state.
  void LoadPrefix();
  std::string PrefixCacheKey(const format::CactFile& file, const model::DecoderConfig& dc,
                             std::string_view system) const;
  model::Snapshot prefix_snapshot_, rescore_snapshot_;
  int confidence_head_ = -1;
  bool fresh_ = true;  // no turn since the prefix
  bool last_turn_had_calls_ = false;
  std::vector<float> logits_;
  std::vector<float> value_logits_;  // [branches, vocab] a branch pass (DecodeCall), or a re-fed
                                     // dead end's [tokens, vocab]
  std::vector<uint8_t> allowed_, text_allowed_;
  std::vector<uint8_t> value_start_list_;  // the engine's candidate list at a value start
  // Text tokens by first byte (the engine's table for its per-state candidate lists) and the
  // current call step's candidate list (CandidateList).
  std::array<std::vector<int32_t>, 256> by_first_byte_;
  std::vector<uint8_t> cand_;
  // The engine's "whole vocabulary" list: every token but the chat markers, with <|im_end|> and
  // </tool_call> (CandidateList, CallTokenConfidence).
  std::vector<uint8_t> whole_list_;
  // The rows the engine computes for such a step: whole_list_ and <think>, </think>, <tool_call>.
  std::vector<uint8_t> whole_rows_;
  std::vector<int32_t> order_;   // the confidence walk's token ids (scratch)
  LogitWalk walk_;               // ... in the walk's order
  int32_t close_array_id_ = -1;  // the single token "]" (-1: none)
  double prefix_seconds_ = 0;
  std::string system_;
  size_t declared_tools_ = 0;  // tools given (inventory_ holds the rendered ones)
  bool retrieval_ = false;
  std::vector<std::string> all_tools_;               // declared tools, minified, in order
  std::vector<std::vector<float>> tool_embeddings_;  // [tool][out_dim]
  std::unique_ptr<ContrastiveEmbedder> embedder_;
  std::vector<size_t> chosen_;    // indices into all_tools_ of the rendered tools
  std::vector<int32_t> history_;  // every earlier turn after the prefix, as fed (re-prefilled
                                  // by retrieval, re-forwarded by the confidence rescore)
  std::string said_;              // every input since the last reset (user turns and tool
                                  // results), what enum grounding searches
};

}  // namespace needle::session
