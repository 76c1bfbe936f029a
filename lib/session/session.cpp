// Session: prefix prefill + snapshot, the engine's turn protocol and the plain greedy loop.
#include "session/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "format/sha256.h"
#include "kernels/libm.h"
#include "kernels/ops.h"
#include "model/snapshot_io.h"
#include "report/log.h"
#include "report/system.h"
#include "report/timer.h"
#include "session/validation.h"
#include "text/json_text.h"
#include "text/response.h"

namespace needle::session {

namespace {

// The engine computes the protocol's probabilities in double with musl's exp and log: the ports
// give its bits on every platform (the platform's libm may differ in the last bit).
using kernels::libm::Exp;
using kernels::libm::Log;

// Softmax statistics of the allowed tokens: max logit and sum of exp(logit - max).
struct AllowedStats {
  float max = -INFINITY;
  double sum = 0;
  double Prob(float logit) const { return Exp(double(logit) - max) / sum; }
  double LogProb(float logit) const { return double(logit) - max - Log(sum); }
};

AllowedStats StatsOf(std::span<const float> logits, const std::vector<uint8_t>& allowed) {
  AllowedStats s;
  for (size_t i = 0; i < logits.size(); ++i)
    if (allowed[i]) s.max = std::max(s.max, logits[i]);
  for (size_t i = 0; i < logits.size(); ++i)
    if (allowed[i]) s.sum += Exp(double(logits[i]) - s.max);
  return s;
}

double LogSoftmaxAt(std::span<const float> logits, int32_t id) {
  const float m = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += Exp(double(l) - m);
  return double(logits[id]) - m - Log(sum);
}

// Lower-case ASCII alphanumerics only (enum grounding compares these forms).
std::string AlnumLower(std::string_view s) {
  std::string out;
  for (char c : s)
    if (std::isalnum(static_cast<unsigned char>(c)))
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The model's tokenizer: parsed once per model and shared by every session on it (the blob's
// pieces, the merge tables and the byte maps: ~5 M instructions per session otherwise).
std::shared_ptr<const text::Tokenizer> ModelTokenizer(const model::Model* model) {
  if (!model) throw Error(ErrorKind::kInternal, "session: no model");
  return model->derived().Get<text::Tokenizer>(
      "text.tokenizer", [model] { return text::Tokenizer::FromCact(model->file()); });
}

}  // namespace

const char* StopReasonName(StopReason r) {
  switch (r) {
    case StopReason::kEos:
      return "eos";
    case StopReason::kImEnd:
      return "im_end";
    case StopReason::kBudget:
      return "budget";
    case StopReason::kNoCandidate:
      return "no_candidate";
    case StopReason::kCallDone:
      return "call_done";
  }
  return "?";
}

// Per-turn decoding state of Respond().
struct Session::TurnState {
  std::string query;  // this turn's input (validation)
  std::string said;   // every input since the reset (enum grounding)
  int max_new_tokens = 0;
  int counted = 0;           // tokens charged to the budget
  int committed = 0;         // tokens generated (branch extensions included, appended not)
  std::vector<int32_t> ids;  // every token added to the context this turn (after the turn)
  std::vector<int32_t> think_ids, text_ids;
  std::string calls;  // call JSON bytes as generated
  bool call_started = false, call_complete = false, dead_end = false, budget_out = false;
  double dc = 1.0;  // min renormalized probability over the call tokens
  // The logits come from a re-feed with every row (branch winner, enum value): the engine's
  // candidate-list forward only follows its own call steps.
  bool full_logits = false;
  double text_logp_sum = 0;  // think / free text: sum of full-softmax log-probs (unpenalized)
  int text_logp_count = 0;
  std::vector<uint8_t> seen;  // tokens committed this turn (repetition penalty)
  StopReason stop = StopReason::kBudget;
  int remaining() const { return max_new_tokens - counted; }
  // The branching floor counts every committed token, an earlier branch's extension included
  // (measured on the engine: after a 16-token object branch charged 1, a number 33 tokens later
  // branches only from max_tokens 70 on, not 55).
  int remaining_committed() const { return max_new_tokens - committed; }
};

Session::Session(const format::CactFile& file, const SessionConfig& config, std::string_view system,
                 std::string_view tools_json)
    : Session(file, std::make_shared<const model::Model>(file), config, system, tools_json) {}

Session::Session(const format::CactFile& file, std::shared_ptr<const model::Model> model,
                 const SessionConfig& config, std::string_view system, std::string_view tools_json)
    : file_(file),
      config_(config),
      shared_tokenizer_(ModelTokenizer(model.get())),
      tokenizer_(*shared_tokenizer_),
      renderer_(tokenizer_),
      model_(std::move(model)) {
  if (!model_ || &model_->file() != &file)
    throw Error(ErrorKind::kInternal, "session: the shared model was not built from its file");
  tools_text_ = text::RenderToolsText(tools_json);
  inventory_ = text::ToolInventory(tools_text_, "tools");
  grammar_ = std::make_unique<grammar::CallGrammar>(grammar::BuildCallSchema(inventory_),
                                                    config_.protocol.compat);
  const int32_t vocab = tokenizer_.vocab_size();
  std::vector<std::string_view> bytes(vocab);  // views into tokenizer_ (outlives constraint_)
  std::vector<uint8_t> text_token(vocab);
  for (int32_t id = 0; id < vocab; ++id) {
    bytes[id] = tokenizer_.TokenBytes(id);
    const auto t = tokenizer_.type(id);
    text_token[id] = t == format::PieceType::kNormal || t == format::PieceType::kByte;
  }
  // The engine's table of text tokens by first byte; whole_list_: its "whole vocabulary" list,
  // every token but the chat markers (user-defined pieces), with <|im_end|> and </tool_call>
  // (control pieces such as <s> included: measured, an <s> with p 0.0009 takes one of the 24
  // places of the confidence walk where a `</tools>` with p 0.003 does not).
  whole_list_.assign(vocab, 0);
  for (int32_t id = 0; id < vocab; ++id) {
    if (text_token[id] && !bytes[id].empty())
      by_first_byte_[static_cast<uint8_t>(bytes[id][0])].push_back(id);
    whole_list_[id] = tokenizer_.type(id) != format::PieceType::kUserDefined;
  }
  whole_list_[renderer_.tokens().im_end] = 1;
  whole_list_[renderer_.tokens().tool_call_end] = 1;
  // The rows such a step computes: the list and <think>, </think>, <tool_call>, which the walk
  // never visits but whose mass is in the softmax sum (measured: demo seed-2 conversation 165
  // turn 2, a `<tool_call>` row of p 0.00018 in the sum makes the walk examine two more tokens,
  // 0.8345 as the engine; `<tools>` with p 6e-6 in the sum would lengthen conversation 63 turn
  // 1's walk past the engine's).
  whole_rows_ = whole_list_;
  for (int32_t id :
       {renderer_.tokens().think, renderer_.tokens().think_end, renderer_.tokens().tool_call})
    whole_rows_[id] = 1;
  // The candidate list at a value start: text tokens whose first byte is one of
  // 0-9 - t f n " { [ ], plus <|im_end|> and </tool_call>; the whole vocabulary if that holds at
  // least half of it.
  {
    const std::string_view starts = "0123456789-tfn\"{[]";
    value_start_list_.assign(vocab, 0);
    int32_t n = 0;
    for (char c : starts)
      for (int32_t id : by_first_byte_[static_cast<uint8_t>(c)]) {
        value_start_list_[id] = 1;
        ++n;
      }
    value_start_list_[renderer_.tokens().im_end] = 1;
    value_start_list_[renderer_.tokens().tool_call_end] = 1;
    if (vocab <= 2 * n) std::fill(value_start_list_.begin(), value_start_list_.end(), 1);
  }
  cand_.assign(vocab, 1);
  // The engine's single-token `]` (encode("]")), forced near the end of the budget.
  if (const std::vector<int32_t> close = tokenizer_.Encode("]", false); close.size() == 1)
    close_array_id_ = close[0];
  constraint_ = std::make_unique<grammar::TokenConstraint>(std::move(bytes), text_token);

  system_ = std::string(system);
  declared_tools_ = inventory_.size();
  const auto& g = file_.geometry();
  confidence_head_ = FindHead(*model_, format::HeadKind::kConfidence);
  // More tools than the prompt shows: each user turn renders the 5 closest to the query (without
  // a contrastive head every tool stays in the prompt, as before).
  retrieval_ = inventory_.size() > text::kMaxRenderedTools &&
               FindHead(*model_, format::HeadKind::kContrastive) >= 0;
  if (retrieval_) InitRetrieval();
  // With retrieval the fixed prefix is the BOS alone (needle_init returns 1, as the engine); each
  // user turn then feeds the rebuilt context again from position 0.
  prefix_ids_ = retrieval_ ? std::vector<int32_t>{renderer_.tokens().bos}
                           : renderer_.PrefixIds(system, tools_text_);
  model::DecoderConfig dc;
  dc.kv_window = config.kv_window ? config.kv_window : g.kv_window;
  dc.sink_len = dc.kv_window ? static_cast<uint32_t>(prefix_ids_.size()) : 0;
  // With retrieval the sinks are the rebuilt prefix, whose length changes per query.
  if (retrieval_ && dc.kv_window) dc.max_sink_len = g.max_seq_len;
  dc.max_positions = g.max_seq_len;
  dc.threads = config.threads;
  dc.path = config.numerics;
  dc.kernels = config.kernels;
  dc.pool_heads = confidence_head_ >= 0;
  // Value-start branching explores its candidates side by side (Decoder::BeginBranches).
  dc.branch_width = static_cast<uint32_t>(std::max(config.protocol.branch_width, 0));
  dc.branch_tokens = static_cast<uint32_t>(std::max(config.protocol.branch_max_tokens, 0));
  decoder_ = std::make_unique<model::Decoder>(*model_, dc);
  logits_.resize(g.vocab);
  allowed_.resize(g.vocab);
  // Think and free text: anything except <|im_start|>, <think> and the tools/call/result markers.
  const auto& chat = renderer_.tokens();
  text_allowed_.assign(g.vocab, 1);
  for (int32_t id : {chat.im_start, chat.think, chat.tools, chat.tools_end, chat.tool_call,
                     chat.tool_call_end, chat.tool_result, chat.tool_result_end})
    text_allowed_[id] = 0;
  report::Stopwatch sw;
  prefix_cache_key_ = PrefixCacheKey(file, dc, system);
  prefix_sink_len_ = dc.sink_len;
  LoadPrefix();
  prefix_seconds_ = sw.Seconds();
}

std::string Session::PrefixCacheKey(const format::CactFile& file, const model::DecoderConfig& dc,
                                    std::string_view system) const {
  if (config_.prefix_cache_dir.empty() || file.path().empty()) return "";
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(file.path(), ec);
  const auto mtime = std::filesystem::last_write_time(file.path(), ec);
  if (ec) return "";  // not a file on disk: no cache
  return fmt::format(
      "needle {} prefix v1\nmodel {}\nbytes {}\nmtime {}\nnumerics {}\nwindow {}\nsinks {}\n"
      "pool {}\nsystem {}\ntools {}",
      NEEDLE_VERSION, abs.string(), file.bytes().size(), mtime.time_since_epoch().count(),
      model::NumericPathName(dc.path), dc.kv_window, dc.sink_len, dc.pool_heads, system,
      tools_text_);
}

void Session::LoadPrefix() {
  const auto& g = file_.geometry();
  const std::string cache_path =
      prefix_cache_key_.empty() ? std::string()
                                : (std::filesystem::path(config_.prefix_cache_dir) /
                                   (format::Sha256Hex(std::span(
                                        reinterpret_cast<const uint8_t*>(prefix_cache_key_.data()),
                                        prefix_cache_key_.size())) +
                                    ".prefix"))
                                      .string();
  prefix_from_cache_ = false;
  if (!retrieval_ && !cache_path.empty() &&
      model::ReadSnapshotFile(cache_path, prefix_cache_key_, &prefix_snapshot_, &logits_) &&
      logits_.size() == g.vocab) {
    try {
      decoder_->Restore(prefix_snapshot_);
      prefix_from_cache_ = true;
    } catch (const InvalidInput&) {
      decoder_->Reset();  // a stale file of another configuration: prefill as usual
    }
  }
  if (!prefix_from_cache_) {
    decoder_->Reset();
    if (decoder_->config().kv_window) decoder_->SetSinkLen(prefix_sink_len_);
    logits_.assign(g.vocab, 0.f);
    if (!prefix_ids_.empty()) decoder_->Prefill(prefix_ids_, logits_);
    if (config_.keep_prefix_state || (!retrieval_ && !cache_path.empty()))
      decoder_->Save(&prefix_snapshot_);
    if (!retrieval_ && !cache_path.empty()) {
      // The cache only saves time: a folder or file that cannot be written is reported and the
      // session goes on without it (the reply is the same).
      try {
        std::filesystem::create_directories(config_.prefix_cache_dir);
        model::WriteSnapshotFile(cache_path, prefix_cache_key_, prefix_snapshot_, logits_);
      } catch (const std::exception& e) {
        report::Log(report::LogSeverity::kWarning,
                    "prefix cache {}: cannot write the tools prefix ({}); continuing without it",
                    config_.prefix_cache_dir, e.what());
      }
    }
  }
  if (!config_.keep_prefix_state) prefix_snapshot_ = model::Snapshot{};  // Reset loads it again
}

void Session::Reset() {
  // Nothing fed since the prefix (a first turn): the decoder is at the prefix state already.
  if (!fresh_) {
    if (config_.keep_prefix_state)
      decoder_->Restore(prefix_snapshot_);
    else
      LoadPrefix();
  }
  fresh_ = true;
  last_turn_had_calls_ = false;
  history_.clear();
  said_.clear();
}

void Session::InitRetrieval() {
  all_tools_ = inventory_;
  EmbedderConfig ec;
  ec.threads = config_.threads;
  ec.numerics = config_.numerics;
  ec.kernels = config_.kernels;
  embedder_ = std::make_unique<ContrastiveEmbedder>(model_, tokenizer_, renderer_.tokens().bos, ec);
  tool_embeddings_.clear();
  for (const std::string& tool : all_tools_) tool_embeddings_.push_back(embedder_->Embed(tool));
}

std::vector<size_t> Session::RetrieveTools(std::string_view query) {
  const std::vector<float> q = embedder_->Embed(query);
  // Cosine similarity (the embeddings are L2-normalized); the top 5, in declaration order.
  std::vector<std::pair<float, size_t>> ranked;
  for (size_t i = 0; i < all_tools_.size(); ++i) {
    float dot = 0.f;
    for (size_t j = 0; j < q.size(); ++j) dot += q[j] * tool_embeddings_[i][j];
    ranked.emplace_back(dot, i);
  }
  if (config_.protocol.trace)
    for (const auto& [score, i] : ranked)
      report::Log(report::LogSeverity::kTrace, "retrieval: tool {} similarity {:.6f}", i, score);
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  ranked.resize(std::min(ranked.size(), text::kMaxRenderedTools));
  std::vector<size_t> chosen;
  chosen.reserve(ranked.size());
  for (const auto& r : ranked) chosen.push_back(r.second);
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

std::string Session::ToolsTextOf(const std::vector<size_t>& chosen) const {
  std::string text = "[";
  for (size_t i : chosen) {
    if (text.size() > 1) text += ",";
    text += all_tools_[i];
  }
  return text + "]";
}

std::string Session::ToolsTextFor(std::string_view query) {
  return retrieval_ ? ToolsTextOf(RetrieveTools(query)) : tools_text_;
}

bool Session::SelectTools(std::string_view query, bool fresh) {
  const std::vector<size_t> chosen = RetrieveTools(query);
  // Later in a conversation the same selection keeps the context as it is (engine, measured).
  if (!fresh && chosen == chosen_) return false;
  chosen_ = chosen;
  inventory_.clear();
  for (size_t i : chosen) inventory_.push_back(all_tools_[i]);
  tools_text_ = ToolsTextOf(chosen);
  grammar_ = std::make_unique<grammar::CallGrammar>(grammar::BuildCallSchema(inventory_),
                                                    config_.protocol.compat);
  prefix_ids_ = renderer_.PrefixIds(system_, tools_text_);
  return true;
}

void Session::Prefill(std::span<const int32_t> ids) { decoder_->Prefill(ids, logits_); }

void Session::Feed(int32_t id) { decoder_->Step(id, logits_); }

int32_t Session::BestAllowed(const std::vector<uint8_t>& allowed) const {
  return BestAllowed(allowed, logits_);
}

int32_t Session::BestAllowed(const std::vector<uint8_t>& allowed, std::span<const float> logits) {
  int32_t best = -1;
  for (int32_t id = 0; id < static_cast<int32_t>(logits.size()); ++id)
    if (allowed[id] && (best < 0 || logits[id] > logits[best])) best = id;
  return best;
}

void Session::TraceStep(const char* what, const std::vector<uint8_t>& allowed, int counted) const {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < static_cast<int32_t>(logits_.size()); ++id)
    if (allowed[id]) ids.push_back(id);
  const size_t k = std::min<size_t>(5, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                    [&](int32_t a, int32_t b) { return logits_[a] > logits_[b]; });
  const float m = *std::max_element(logits_.begin(), logits_.end());
  double z = 0;
  for (float l : logits_) z += Exp(double(l) - m);
  std::string line = fmt::format("{} #{} ({} valid, p_full(top) {:.4f}):", what, counted,
                                 ids.size(), Exp(double(logits_[ids[0]]) - m) / z);
  for (size_t i = 0; i < k; ++i)
    line += fmt::format(" {}:{:?}:{:.4f}", ids[i], tokenizer_.TokenBytes(ids[i]), logits_[ids[i]]);
  report::Log(report::LogSeverity::kTrace, "{}", line);
}

int32_t Session::PenalizedBest(const std::vector<uint8_t>& allowed,
                               const std::vector<uint8_t>& seen) const {
  const float rp = config_.protocol.repetition_penalty;
  int32_t best = -1;
  float best_logit = 0;
  for (int32_t id = 0; id < static_cast<int32_t>(logits_.size()); ++id) {
    if (!allowed[id]) continue;
    float l = logits_[id];
    if (seen[id]) l = l > 0 ? l / rp : l * rp;
    if (best < 0 || l > best_logit) {
      best = id;
      best_logit = l;
    }
  }
  return best;
}

const std::vector<uint8_t>& Session::CandidateList(const grammar::GrammarState& gs) {
  // The engine's first-byte set per grammar state (fn 139, read from the wasm): fixed sets for
  // the structure, the value start and numbers; the next byte of a literal or of the matching
  // tool names; none for the text of strings and argument keys (there it computes every row).
  using grammar::FrameKind;
  const grammar::CallGrammar& g = *grammar_;
  std::array<bool, 256> first{};
  bool whole = false;
  auto set = [&](std::string_view bytes) {
    for (char c : bytes) first[static_cast<uint8_t>(c)] = true;
  };
  auto accepted = [&] {
    grammar::GrammarState probe;
    for (int b = 0; b < 256; ++b) {
      grammar::CallGrammar::CopyState(gs, &probe);
      first[b] = g.Feed(probe, static_cast<uint8_t>(b));
    }
  };
  auto string_text = [&](uint8_t phase) {
    if (phase == 0)
      whole = true;
    else if (phase == 1)
      set("\"\\/bfnrtu");
    else
      set("0123456789abcdefABCDEF");
  };
  constexpr std::string_view kValueStart = "0123456789-tfn\"{[]";
  const grammar::Frame& f = gs.top();
  switch (f.kind) {
    case FrameKind::kTop:
      set(f.phase == 0 ? "[" : f.phase == 1 ? "{]" : f.phase == 2 ? "]," : f.phase == 3 ? "{" : "");
      break;
    case FrameKind::kCall:
      if (f.phase <= 1)
        accepted();  // the fixed `"name":"` / `,"arguments":` text
      else
        set(f.phase == 2 ? "{" : "}");
      break;
    case FrameKind::kObject:
      set(f.phase == 1 ? ":" : f.phase == 2 ? kValueStart : f.phase == 3 ? ",}" : "\"}");
      break;
    case FrameKind::kArray:
      set(f.phase == 1 ? "]," : kValueStart);
      break;
    case FrameKind::kKey:
      if (f.node < 0)
        accepted();  // tool names: the next byte of every name still matching, `"` at its end
      else
        string_text(f.phase);
      break;
    case FrameKind::kString:
      string_text(f.phase);
      break;
    case FrameKind::kNumber:
      set("0123456789}Ee]+,-.");
      break;
    case FrameKind::kLiteral:
      if (f.literal_set == grammar::kLiteralsEnum && f.count >= 1)
        string_text(f.phase);  // an enum string: the engine decodes it as a string
      else
        accepted();
      break;
  }
  size_t n = 0;
  for (int b = 0; b < 256; ++b)
    if (first[b]) n += by_first_byte_[b].size();
  if (whole || cand_.size() <= 2 * n) {
    cand_ = whole_rows_;
    return cand_;
  }
  std::fill(cand_.begin(), cand_.end(), 0);
  for (int b = 0; b < 256; ++b)
    if (first[b])
      for (int32_t id : by_first_byte_[b]) cand_[id] = 1;
  cand_[renderer_.tokens().im_end] = 1;
  cand_[renderer_.tokens().tool_call_end] = 1;
  return cand_;
}

double Session::CallTokenConfidence(const std::vector<uint8_t>& allowed,
                                    const std::vector<uint8_t>& candidates) {
  // The engine's walk (ENGINE-PROTOCOL.md section 2, corrected by measurement): softmax over
  // the step's listed rows; tokens in descending logit order; valid ones add to V, every one to
  // M; after the first valid token the walk stops once M >= 0.99 or `confidence_walk` further
  // tokens were examined. The chosen (first valid) token's confidence is p / V.
  const auto& chat = renderer_.tokens();
  const ProtocolConfig& pc = config_.protocol;
  // The softmax runs over every row the step computed (`candidates`: a restricted list with
  // <|im_end|> and </tool_call>; whole_rows_ for the "whole vocabulary"; every row after a
  // re-feed): <|im_end|> is in the sum (without it the mass that ends the walk comes a token early:
  // demo held-out line 146), and so are <think>, </think>, <tool_call> where they were computed.
  // The walk visits the listed text and control tokens only (whole_list_ but <|im_end|>).
  auto in_sum = [&](int32_t id) { return candidates[id] != 0; };
  order_.clear();
  float m = -INFINITY;
  for (int32_t id = 0; id < static_cast<int32_t>(logits_.size()); ++id)
    if (in_sum(id)) m = std::max(m, logits_[id]);
  double sum = 0;
  for (int32_t id = 0; id < static_cast<int32_t>(logits_.size()); ++id)
    if (in_sum(id)) {
      sum += Exp(double(logits_[id]) - m);  // in id order
      if (whole_list_[id] && id != chat.im_end) order_.push_back(id);
    }
  // Descending logit, ties by id (session/logit_walk.h: the best few sorted, the rest heaped
  // only if the walk reaches them).
  walk_.Start(logits_.data(), order_);
  double mass = 0, valid = 0, chosen = -1;
  int after = 0;
  int32_t id = 0;
  while (walk_.Next(&id)) {
    if (chosen >= 0 && (mass >= pc.confidence_mass || after >= pc.confidence_walk)) break;
    if (chosen >= 0) ++after;
    const double p = Exp(double(logits_[id]) - m) / sum;
    mass += p;
    if (allowed[id]) {
      valid += p;
      if (chosen < 0) chosen = p;
    }
  }
  if (chosen < 0) return 0;
  return valid > 0 ? chosen / valid : chosen;
}

double Session::HeadConfidence(const std::vector<int32_t>& generated, bool* rescored) {
  if (confidence_head_ < 0) return -1;
  const size_t head = static_cast<size_t>(confidence_head_);
  float logit = 0;
  // The engine's cached features serve while valid; after a rewind beyond its history (or under
  // NEEDLE_CONF_RESCORE) it re-forwards prefix + every turn token so far from position 0 in
  // 32-token calls with a fresh cache (fn 184), and its cache stays invalid for the later turns
  // of the conversation (fn 184 leaves it reset).
  const size_t context = prefix_ids_.size() + history_.size() + generated.size();
  if ((decoder_->PoolCacheValid() && !config_.protocol.conf_rescore) ||
      context != decoder_->position()) {
    decoder_->HeadOutput(head, {&logit, 1});
  } else {
    std::vector<int32_t> ids = prefix_ids_;
    ids.insert(ids.end(), history_.begin(), history_.end());
    ids.insert(ids.end(), generated.begin(), generated.end());
    *rescored = true;
    const uint32_t sinks = decoder_->sink_len();
    decoder_->Save(&rescore_snapshot_);
    decoder_->Reset();
    decoder_->SetSinkLen(sinks);
    decoder_->Prefill(ids, {});
    decoder_->HeadOutput(head, {&logit, 1});
    decoder_->Restore(rescore_snapshot_);
    decoder_->InvalidatePoolCache();
  }
  // f32: 1 / (expf(-z) + 1).
  return kernels::Sigmoid(logit);
}

TurnResult Session::Complete(std::string_view query, int max_tokens, TokenFilter* filter) {
  Reset();
  fresh_ = false;
  return Decode(renderer_.FirstTurnIds(query), max_tokens, filter);
}

TurnResult Session::Decode(std::vector<int32_t> turn_ids, int max_tokens, TokenFilter* filter) {
  TurnResult r;
  r.turn_ids = std::move(turn_ids);
  report::Stopwatch pw;
  decoder_->Prefill(r.turn_ids, logits_);
  r.prefill_seconds = pw.Seconds();
  r.prefill_tps = r.turn_ids.size() / std::max(r.prefill_seconds, 1e-9);

  const auto& chat = renderer_.tokens();
  if (filter) filter->BeginTurn();
  report::Stopwatch dw;
  r.stop = StopReason::kBudget;
  for (int step = 0; step < max_tokens; ++step) {
    int32_t best = -1;
    if (filter) {
      filter->AllowedMask(allowed_);
      best = BestAllowed(allowed_);
    } else {
      best =
          static_cast<int32_t>(std::max_element(logits_.begin(), logits_.end()) - logits_.begin());
    }
    if (best < 0) {
      r.stop = StopReason::kNoCandidate;
      break;
    }
    r.generated_ids.push_back(best);
    if (filter) filter->Commit(best);
    if (best == chat.eos || best == chat.im_end) {
      r.stop = best == chat.eos ? StopReason::kEos : StopReason::kImEnd;
      break;
    }
    if (step + 1 < max_tokens) decoder_->Step(best, logits_);
  }
  r.decode_seconds = dw.Seconds();
  r.decode_tps = r.generated_ids.size() / std::max(r.decode_seconds, 1e-9);
  r.text = tokenizer_.Decode(r.generated_ids);
  return r;
}

// The tool-call JSON after <tool_call> (PROTOCOL.md section 3), including value-start branching
// and enum grounding. Ends with the call complete (</tool_call> committed, <|im_end|> appended),
// a dead end (<|im_end|> appended) or the budget exhausted (nothing appended).
void Session::DecodeCall(TurnState& t, bool require_call) {
  const auto& chat = renderer_.tokens();
  const grammar::CallGrammar& g = *grammar_;
  grammar::TokenConstraint& tc = *constraint_;
  const ProtocolConfig& pc = config_.protocol;
  grammar::GrammarState gs = g.Start(require_call);
  // feed = false: the decoder already holds the token (a branch winner's replayed positions).
  auto commit = [&](int32_t id, bool counted, bool feed = true) {
    t.seen[id] = 1;
    t.ids.push_back(id);
    ++t.committed;
    if (counted) ++t.counted;
    t.calls += tc.bytes(id);
    if (!t.call_started && !t.calls.empty()) t.call_started = true;
    tc.Advance(g, gs, id);
    if (feed) Feed(id);
  };
  // Which value a state is at the start of: node index, or -1; the value belongs to the
  // arguments object or to an object nested in it (its frame depth in `object_depth`).
  // `after_quote`: the value's opening quote is already in (the key token carried it).
  auto value_start = [&](const grammar::GrammarState& s, bool* after_quote,
                         int* object_depth) -> int32_t {
    *after_quote = false;
    *object_depth = s.depth;
    const int32_t n = g.ArgumentValueStart(s);
    if (n >= 0) return n;
    if (grammar::CallGrammar::ObjectChainDepth(s, s.depth - 1) < 0) return -1;
    const grammar::Frame& top = s.top();
    const bool empty_string =
        top.kind == grammar::FrameKind::kString && top.phase == 0 && top.count == 0;
    const bool enum_open =
        top.kind == grammar::FrameKind::kLiteral && top.literal_set == 0 && top.count == 1;
    if (!empty_string && !enum_open) return -1;
    *after_quote = true;
    *object_depth = s.depth - 1;
    return top.node;
  };
  // A branch ends at the token that closes its value, even if that token also opens the next
  // key: the next value then gets its own value-start handling (grounding, branching).
  auto advance_closes = [&](grammar::GrammarState& s, int32_t id, int object_depth) {
    return g.FeedClosesArgumentValue(s, tc.bytes(id), object_depth);
  };
  int32_t handled_value_at = -1;  // counted-token index of the last value start handled

  for (;;) {
    // The budget is checked first: a call array closed by the last token of the budget has no
    // room for its </tool_call> and is truncated (measured on the engine: demo held-out line 114
    // at budget 40, `...}}]` as the 40th token, "tool call truncated", returned 40).
    if (t.counted >= t.max_new_tokens) {
      t.budget_out = true;
      t.stop = StopReason::kBudget;
      return;
    }
    if (gs.complete()) {
      t.call_complete = true;
      t.ids.push_back(chat.tool_call_end);
      ++t.counted;
      ++t.committed;
      Feed(chat.tool_call_end);
      // <|im_end|> closes the turn only when budget is left after </tool_call>: a </tool_call>
      // on the budget's last token ends the turn like a budget stop (measured on the engine: the
      // head confidence of demo held-out lines 108, 170, 257 at budget 24 is the engine's only
      // without <|im_end|> in the pooled features).
      if (t.counted < t.max_new_tokens) {
        t.ids.push_back(chat.im_end);
        Feed(chat.im_end);
      }
      t.stop = StopReason::kCallDone;
      return;
    }
    // With at most 4 tokens of budget left, a `]` that completes the call array is forced (p 1;
    // the engine's rule, measured: a call closed with `"}}` 3 tokens before the budget ends gets
    // its `]` and </tool_call> where the model wanted `,{"` for another call).
    if (t.remaining() <= pc.close_reserve && close_array_id_ >= 0) {
      grammar::GrammarState probe;
      grammar::CallGrammar::CopyState(gs, &probe);
      if (tc.Advance(g, probe, close_array_id_) && probe.complete()) {
        commit(close_array_id_, true);
        t.full_logits = false;
        continue;
      }
    }
    const size_t n_allowed = tc.Mask(g, gs, allowed_);
    if (n_allowed == 0) {
      t.dead_end = true;
      t.ids.push_back(chat.im_end);
      Feed(chat.im_end);
      t.stop = StopReason::kNoCandidate;
      return;
    }
    bool after_quote = false;
    int object_depth = 0;
    const int32_t node = handled_value_at == static_cast<int32_t>(t.ids.size())
                             ? -1
                             : value_start(gs, &after_quote, &object_depth);
    if (node >= 0) {
      handled_value_at = static_cast<int32_t>(t.ids.size());
      const grammar::SchemaNode& sn = g.schema().nodes[node];
      // Enum grounding: values found in the query are teacher-forced; the best sum wins.
      std::vector<std::string> grounded;
      if (sn.has_enum) {
        const std::string q = AlnumLower(t.said);
        for (const std::string& v : grammar::StringEnumValues(sn)) {
          const std::string a = AlnumLower(v);
          // Values shorter than 3 characters never count ("on" is not grounded by "turn on":
          // measured on the engine, which only runs its enum selection for longer values).
          if (a.size() >= 3 && q.find(a) != std::string::npos) grounded.push_back(v);
        }
      }
      // The floor counts every committed token, like the branch floor (measured on the engine:
      // demo held-out line 77, "451 miles to kilometers", returns the engine's count at every
      // budget 36-42 only so; a charged-token floor grounded `kilometers` at budget 40).
      if (!grounded.empty() && t.remaining_committed() >= pc.enum_min_budget) {
        // The values the grammar takes, each with its tokens.
        std::vector<std::string> names;
        std::vector<std::vector<int32_t>> values;
        for (const std::string& v : grounded) {
          // At a value start before the opening quote (the key token did not carry it: `"day"`
          // then `:`) the quote is forced with the value and only it is charged (measured: the
          // engine's demo conversation 99 turn 2 commits one token more than charging the quote
          // as a step; docs/PROTOCOL-NOTES.md item 17).
          std::vector<int32_t> ids =
              tokenizer_.Encode(after_quote ? v + "\"" : "\"" + v + "\"", false);
          grammar::GrammarState probe;
          grammar::CallGrammar::CopyState(gs, &probe);
          bool ok = true;
          for (int32_t id : ids) ok = ok && tc.Advance(g, probe, id);
          if (!ok || ids.empty()) continue;
          names.push_back(v);
          values.push_back(std::move(ids));
        }
        // A value's score is the sum of its tokens' log p; every token but the last is fed for
        // the next one's. The engine feeds each value from a rewind; here they are branches fed
        // side by side (Decoder::StepBranches: the same bits, no state saved or restored).
        std::vector<double> scores(values.size());
        size_t longest = 0;
        for (size_t i = 0; i < values.size(); ++i) {
          scores[i] = LogSoftmaxAt(logits_, values[i][0]);
          longest = std::max(longest, values[i].size() - 1);
        }
        if (!values.empty()) {
          decoder_->BeginBranches(values.size(), std::max<size_t>(longest, 1));
          const size_t V = logits_.size();
          std::vector<uint32_t> live;
          std::vector<int32_t> feed;
          for (size_t k = 0; k < longest; ++k) {
            live.clear();
            feed.clear();
            for (size_t i = 0; i < values.size(); ++i)
              if (k + 1 < values[i].size()) {
                live.push_back(static_cast<uint32_t>(i));
                feed.push_back(values[i][k]);
              }
            value_logits_.resize(live.size() * V);
            decoder_->StepBranches(live, feed, value_logits_);
            for (size_t j = 0; j < live.size(); ++j)
              scores[live[j]] += LogSoftmaxAt(
                  std::span<const float>(value_logits_).subspan(j * V, V), values[live[j]][k + 1]);
          }
        }
        double best_score = -INFINITY;
        int best = -1;
        for (size_t i = 0; i < values.size(); ++i) {
          if (pc.trace)
            report::Log(report::LogSeverity::kTrace, "enum grounding: {:?} sum log p {:.6f}",
                        names[i], scores[i]);
          if (scores[i] > best_score) {
            best_score = scores[i];
            best = static_cast<int>(i);
          }
        }
        // The winner's positions but its last become the decoder's (as re-feeding them would
        // leave them); the commit below feeds only the last, as with a branch winner.
        if (!values.empty()) decoder_->EndBranches(best);
        if (best >= 0) {
          const std::vector<int32_t>& best_ids = values[best];
          // Like a branch winner: the whole value is committed, only its first token charged to
          // the budget (measured: a truncated turn with "Friday" grounded returns max_tokens + 3
          // for its 4 tokens).
          for (size_t i = 0; i < best_ids.size(); ++i)
            commit(best_ids[i], /*counted=*/i == 0, /*feed=*/i + 1 == best_ids.size());
          t.full_logits = true;
          // The winner's share among the grounded values (a softmax over their summed log p)
          // enters the call-token confidence: 1 with one value (measured on the engine: "from
          // kilograms" over "pounds", sums -0.4227 / -1.0784, gives its 0.6583).
          double z = 0;
          for (double sc : scores) z += Exp(sc - best_score);
          t.dc = std::min(t.dc, 1.0 / z);
          continue;
        }
      }
      // Every kind of value branches, containers included (an object value's branch runs until
      // the object closes; measured on the engine: the reply changes exactly where 29 tokens of
      // budget are left at a nested object's start).
      const bool branch_type = !sn.has_enum || grounded.empty();
      const int32_t top = BestAllowed(allowed_);
      // The engine's step distribution at a value start is a softmax over its candidate list
      // (tokens whose first byte can start some JSON value, plus <|im_end|> and </tool_call>),
      // not over the grammar-valid tokens: the 0.95 threshold and the first token's score use it.
      const AllowedStats list_stats = StatsOf(logits_, value_start_list_);
      // No branching at a value whose opening quote came with the key token (`":"`), enum strings
      // included: the value has already left the value-start state, and the step's logits are
      // not over the value-start list (measured on the engine: the demo model's ungrounded
      // `"unit":"` with `celsius` at full-vocabulary p 0.67 decodes at the speed of plain steps,
      // no exploration; docs/PROTOCOL-NOTES.md item 1).
      if (pc.trace)
        report::Log(
            report::LogSeverity::kTrace,
            "value start node {} after_quote {} grounded {} p_top {} left {}", node, after_quote,
            grounded.size(),
            after_quote ? std::string("-") : fmt::format("{:.4f}", list_stats.Prob(logits_[top])),
            t.remaining());
      if (branch_type && !after_quote && n_allowed >= 2 && pc.branch_width > 0 &&
          pc.branch_max_tokens > 0 && list_stats.Prob(logits_[top]) < pc.branch_threshold &&
          t.remaining_committed() >= pc.branch_min_budget) {
        // Value-start branching: explore the best few first tokens, keep the best mean log-prob.
        std::vector<int32_t> cands;
        for (int32_t id = 0; id < static_cast<int32_t>(logits_.size()); ++id)
          if (allowed_[id]) cands.push_back(id);
        const size_t width = std::min<size_t>(cands.size(), pc.branch_width);
        std::partial_sort(cands.begin(), cands.begin() + width, cands.end(),
                          [&](int32_t a, int32_t b) {
                            return logits_[a] > logits_[b] || (logits_[a] == logits_[b] && a < b);
                          });
        cands.resize(width);
        // The candidates grow side by side (Decoder::StepBranches): each pass feeds every open
        // branch its last token, the weights read once for all of them; each token gets the
        // bits of a step of its own after its branch's earlier tokens, and the decoder records
        // the engine's calls of exploring them one after the other.
        struct Branch {
          std::vector<int32_t> ids;
          std::vector<double> probs;
          double sum_lp = 0;
          bool closed = false, open = true;  // open: may grow
          grammar::GrammarState state;
        };
        std::vector<Branch> branches(width);
        for (size_t i = 0; i < width; ++i) {
          Branch& b = branches[i];
          grammar::CallGrammar::CopyState(gs, &b.state);
          b.ids = {cands[i]};
          // First token: its probability over the candidate list (score and confidence).
          b.probs = {list_stats.Prob(logits_[cands[i]])};
          b.sum_lp = Log(b.probs[0]);
          b.closed = advance_closes(b.state, cands[i], object_depth);
          b.open = !b.closed && static_cast<int>(b.ids.size()) < pc.branch_max_tokens;
        }
        decoder_->BeginBranches(width, static_cast<size_t>(pc.branch_max_tokens));
        const size_t V = logits_.size();
        std::vector<uint32_t> live;
        std::vector<int32_t> feed;
        for (;;) {
          live.clear();
          feed.clear();
          for (size_t i = 0; i < width; ++i)
            if (branches[i].open) {
              live.push_back(static_cast<uint32_t>(i));
              feed.push_back(branches[i].ids.back());
            }
          if (live.empty()) break;
          value_logits_.resize(live.size() * V);
          decoder_->StepBranches(live, feed, value_logits_);
          for (size_t j = 0; j < live.size(); ++j) {
            Branch& b = branches[live[j]];
            const std::span<const float> lg =
                std::span<const float>(value_logits_).subspan(j * V, V);
            if (tc.Mask(g, b.state, allowed_) == 0) {  // dead end
              b.open = false;
              continue;
            }
            // Extension tokens: greedy over the valid ones, scored (and entered in the confidence
            // list) with their full-vocabulary probability.
            const int32_t next = BestAllowed(allowed_, lg);
            const double lp = LogSoftmaxAt(lg, next);
            b.sum_lp += lp;
            b.probs.push_back(Exp(lp));
            b.ids.push_back(next);
            b.closed = advance_closes(b.state, next, object_depth);
            b.open = !b.closed && static_cast<int>(b.ids.size()) < pc.branch_max_tokens;
          }
        }
        double best_score = -INFINITY;
        int best = -1;
        for (size_t i = 0; i < width; ++i) {
          const Branch& b = branches[i];
          // Mean log-prob; a branch that did not close its value (token cap, dead end) pays a
          // fixed penalty.
          const double score = b.sum_lp / static_cast<double>(b.ids.size()) -
                               (b.closed ? 0.0 : pc.branch_open_penalty);
          if (pc.trace)
            report::Log(report::LogSeverity::kTrace, "  branch {:?} score {:.4f} tokens {} p {}",
                        tokenizer_.Decode(b.ids), score, b.ids.size(), fmt::join(b.probs, " "));
          if (score > best_score) {
            best_score = score;
            best = static_cast<int>(i);
          }
        }
        if (best < 0) best = 0;  // every score -inf (a probability that underflowed to 0)
        const std::vector<int32_t>& best_ids = branches[best].ids;
        const std::vector<double>& best_probs = branches[best].probs;
        // The engine re-feeds the winner's tokens from the branch point. Every token but the
        // last was already fed while exploring it: those positions become the decoder's (the
        // same bits and bookkeeping as feeding them again), and only the last token is fed
        // again, for its logits. A branch that fed all its tokens (dead end) is re-fed.
        const bool best_captured = decoder_->BranchDepth(best) + 1 == best_ids.size();
        decoder_->EndBranches(best_captured ? best : -1);
        for (size_t i = 0; i < best_ids.size(); ++i) {
          t.dc = std::min(t.dc, best_probs[i]);
          commit(best_ids[i], /*counted=*/i == 0,
                 /*feed=*/best_captured && i + 1 == best_ids.size());
        }
        if (!best_captured) {
          // A dead end fed all its tokens: known now, they are fed again in multi-token passes.
          const size_t V = logits_.size();
          value_logits_.resize(best_ids.size() * V);
          decoder_->StepEach(best_ids, value_logits_);
          std::copy(value_logits_.end() - static_cast<std::ptrdiff_t>(V), value_logits_.end(),
                    logits_.begin());
        }
        t.full_logits = true;
        continue;
      }
    }
    const int32_t best = BestAllowed(allowed_);
    if (pc.trace) TraceStep("call", allowed_, t.counted);
    // The engine's step logits hold only the rows of its candidate list for this state (the rest
    // -1e30), except right after a re-feed.
    if (t.full_logits) std::fill(cand_.begin(), cand_.end(), 1);
    const double token_confidence =
        CallTokenConfidence(allowed_, t.full_logits ? cand_ : CandidateList(gs));
    t.full_logits = false;
    if (pc.trace) report::Log(report::LogSeverity::kTrace, "  confidence {:.6f}", token_confidence);
    t.dc = std::min(t.dc, token_confidence);
    commit(best, true);
  }
}

Reply Session::Respond(std::string_view input, int max_new_tokens) {
  const auto& chat = renderer_.tokens();
  Reply reply;
  TurnState t;
  t.query = std::string(input);
  // Enum grounding searches everything said since the reset, tool results included, not only
  // this turn's input (measured on the engine: a value named two turns earlier, or only in a tool
  // result, is still teacher-forced; docs/PROTOCOL-NOTES.md item 11).
  if (fresh_) said_.clear();
  said_.append(input).push_back('\n');
  t.said = said_;
  t.max_new_tokens = max_new_tokens;
  const bool tool_result = !fresh_ && last_turn_had_calls_;
  const bool was_fresh = fresh_;
  TurnResult& r = reply.turn;
  r.turn_ids = fresh_        ? renderer_.FirstTurnIds(input)
               : tool_result ? renderer_.ToolResultTurnIds(input, declared_tools_)
                             : renderer_.UserTurnIds(input);
  fresh_ = false;
  // Retrieval (a user turn with more than 5 tools): the tools closest to the query are rendered
  // and the whole context (new prefix, every earlier turn, this turn) is prefilled again, the
  // new prefix pinned as the sinks. Tool-result turns, and later user turns that retrieve the
  // same tools, keep the context.
  const bool rebuild = retrieval_ && !tool_result && SelectTools(input, was_fresh);
  // The query's embedding forward (retrieval) runs through the head's pooling too: its call does
  // not start where the cached features stand, so they are invalid from then on; a rebuild starts
  // a fresh pool, a turn that keeps the context re-forwards at the end (engine: the pool position
  // stays at the previous turn's end, valid flag 0; docs/PROTOCOL-NOTES.md item 4c).
  if (retrieval_ && !tool_result && !rebuild) decoder_->InvalidatePoolCache();
  const size_t before = rebuild ? prefix_ids_.size() + history_.size() : decoder_->position();
  // A turn longer than the room left keeps only its tail: prefix + turn + budget <= max_seq_len
  // (a plain token cut, at least one token kept).
  const int64_t room =
      int64_t(file_.geometry().max_seq_len) - (int64_t(before) + std::max(max_new_tokens, 0));
  const size_t keep = static_cast<size_t>(std::max<int64_t>(1, room));
  if (r.turn_ids.size() > keep)
    r.turn_ids.erase(r.turn_ids.begin(), r.turn_ids.end() - static_cast<std::ptrdiff_t>(keep));
  history_.insert(history_.end(), r.turn_ids.begin(), r.turn_ids.end());
  // With a rebuild the whole context is fed again from position 0 (BOS, the new prefix pinned as
  // sinks, every earlier turn, this turn); the turn reported is what follows the BOS (the
  // engine's debug line).
  std::vector<int32_t> rebuilt;
  if (rebuild) {
    rebuilt = prefix_ids_;
    rebuilt.insert(rebuilt.end(), history_.begin(), history_.end());
    r.turn_ids.assign(rebuilt.begin() + 1, rebuilt.end());
    r.context_rebuilt = true;
    decoder_->Reset();
    if (decoder_->config().kv_window)
      decoder_->SetSinkLen(static_cast<uint32_t>(
          std::min<size_t>(prefix_ids_.size(), file_.geometry().max_seq_len)));
  }
  report::Stopwatch pw;
  if (rebuild) {
    // The engine feeds its fixed prefix (the BOS) as a call of its own, then the rest as the
    // turn: 32-token calls counted from position 1 (fn 260 -> fn 108, then fn 139). Past sinks +
    // window the chunk boundaries decide which keys a token sees.
    const std::span<const int32_t> all(rebuilt);
    Prefill(all.first(1));
    Prefill(all.subspan(1));
  } else {
    Prefill(r.turn_ids);
  }
  r.prefill_seconds = pw.Seconds();
  r.prefill_tps = r.turn_ids.size() / std::max(r.prefill_seconds, 1e-9);
  report::Stopwatch dw;

  if (inventory_.empty()) {
    // Zero tools: the empty call is appended without sampling.
    std::vector<int32_t> ids{chat.tool_call};
    tokenizer_.EncodeAppend("[]", false, &ids);
    ids.push_back(chat.tool_call_end);
    ids.push_back(chat.im_end);
    for (int32_t id : ids) Feed(id);
    r.generated_ids = ids;
    r.text = tokenizer_.Decode(ids);
    r.stop = StopReason::kCallDone;
    reply.zero_tools = true;
    reply.type = "call";
    reply.reasoning = "no tools declared, returning the empty call";
    reply.confidence = 1.0;
    reply.peak_ram_mb = double(report::PeakRssBytes()) / (1024.0 * 1024.0);
    last_turn_had_calls_ = false;
    return reply;
  }

  t.seen.assign(logits_.size(), 0);
  auto commit = [&](int32_t id) {
    t.seen[id] = 1;
    t.ids.push_back(id);
    ++t.counted;
    ++t.committed;
    Feed(id);
  };
  // Think and free text: the highest allowed logit after the repetition penalty on every token
  // committed earlier in this turn; the confidence uses the unpenalized distribution.
  auto text_step = [&](const std::vector<uint8_t>& allowed) {
    const int32_t tok = PenalizedBest(allowed, t.seen);
    if (tok != chat.eos && tok != chat.im_end && tok != chat.think_end) {
      t.text_logp_sum += LogSoftmaxAt(logits_, tok);
      ++t.text_logp_count;
    }
    return tok;
  };
  auto think_phase = [&]() -> bool {  // true: continue with the call
    while (t.counted < t.max_new_tokens) {
      int32_t tok;
      if (t.counted >= t.max_new_tokens - config_.protocol.think_reserve) {
        tok = chat.think_end;
      } else {
        tok = text_step(text_allowed_);
      }
      commit(tok);
      if (tok == chat.eos || tok == chat.im_end) {
        t.stop = tok == chat.eos ? StopReason::kEos : StopReason::kImEnd;
        return false;
      }
      if (tok == chat.think_end) {
        if (t.counted >= t.max_new_tokens) {
          t.budget_out = true;
          return false;
        }
        commit(chat.tool_call);
        return true;
      }
      t.think_ids.push_back(tok);
    }
    t.budget_out = true;
    return false;
  };

  if (max_new_tokens > 0) {
    if (!tool_result) {
      const int32_t first =
          logits_[chat.think] > logits_[chat.tool_call] ? chat.think : chat.tool_call;
      commit(first);
      t.seen[first] = 0;  // the step-0 choice is not penalized later
      if (first == chat.tool_call || think_phase()) DecodeCall(t, false);
    } else {
      // Tool-result turn: <think>, <tool_call>, EOS, <|im_end|> or free text.
      std::vector<uint8_t> first_allowed = text_allowed_;
      first_allowed[chat.think] = 1;
      first_allowed[chat.tool_call] = 1;
      const int32_t first = BestAllowed(first_allowed);
      commit(first);
      if (first == chat.think) {
        if (think_phase()) DecodeCall(t, true);
      } else if (first == chat.tool_call) {
        DecodeCall(t, true);
      } else if (first == chat.eos || first == chat.im_end) {
        t.stop = first == chat.eos ? StopReason::kEos : StopReason::kImEnd;
      } else {
        // Free text until EOS / <|im_end|> / budget.
        std::vector<uint8_t> text_only = text_allowed_;
        text_only[chat.think_end] = 0;
        t.text_ids.push_back(first);
        for (;;) {
          if (t.counted >= t.max_new_tokens) {
            t.stop = StopReason::kBudget;
            break;
          }
          const int32_t tok = text_step(text_only);
          commit(tok);
          if (tok == chat.eos || tok == chat.im_end) {
            t.stop = tok == chat.eos ? StopReason::kEos : StopReason::kImEnd;
            break;
          }
          t.text_ids.push_back(tok);
        }
      }
    }
  }
  r.decode_seconds = dw.Seconds();
  Finish(t, &reply);
  // The context keeps exactly what was fed (an exhausted budget appends nothing).
  history_.insert(history_.end(), t.ids.begin(), t.ids.end());
  return reply;
}

void Session::Finish(TurnState& t, Reply* reply) {
  TurnResult& r = reply->turn;
  r.generated_ids = t.ids;
  r.text = tokenizer_.Decode(t.ids);
  r.stop = t.stop;
  r.decode_tps = t.counted / std::max(r.decode_seconds, 1e-9);
  reply->counted_tokens = t.committed;
  reply->calls_text = t.calls;
  reply->think_text = tokenizer_.Decode(t.think_ids);
  reply->free_text = tokenizer_.Decode(t.text_ids);
  const std::string_view think = text::TrimAscii(reply->think_text);
  const std::string_view free = text::TrimAscii(reply->free_text);
  if (!think.empty())
    reply->reasoning = std::string(think);
  else if (!free.empty())
    reply->reasoning = std::string(free);
  reply->head_confidence = HeadConfidence(t.ids, &reply->head_rescored);
  last_turn_had_calls_ = false;
  if (t.call_started) {
    reply->type = "call";
    reply->decode_confidence = t.dc;
    if (t.call_complete) {
      // The engine's own check decides (text::ParseEngineJson): looser than JSON for numbers
      // and strings, so a "successful" call's text may not be JSON ("level":011); it is
      // reported as written.
      const auto parsed = text::ParseEngineJson(t.calls);
      if (!parsed) {
        reply->success = false;
        reply->error = "malformed function_calls JSON: " + t.calls;
        reply->error_code = "malformed";
        reply->reason = "runtime_failure";
      } else {
        reply->function_calls = t.calls;
        last_turn_had_calls_ =
            parsed->kind == text::EngineJsonValue::Kind::kArray && !parsed->items.empty();
        if (last_turn_had_calls_) {
          Validation v = Validate(t.calls, t.said, t.query, grammar_->schema());
          reply->has_validation = true;
          reply->ungrounded = std::move(v.ungrounded);
          reply->negation = v.negation;
        }
      }
    } else {
      reply->success = false;
      reply->error = "tool call truncated: token budget exhausted";
      reply->error_code = "truncated";
      reply->reason = "runtime_failure";
    }
  }
  if (reply->head_confidence >= 0) {
    double c;
    if (reply->type == "call") {
      c = std::min(reply->head_confidence, t.dc);
    } else if (t.text_logp_count > 0) {
      // Geometric mean of the think / free-text tokens' probabilities.
      c = std::min(reply->head_confidence, Exp(t.text_logp_sum / t.text_logp_count));
    } else {
      c = 0;
    }
    reply->confidence = c;
  }
  reply->peak_ram_mb = double(report::PeakRssBytes()) / (1024.0 * 1024.0);
}

std::string Reply::EnvelopeJson() const {
  auto str = [](const std::optional<std::string>& s) {
    return s ? nlohmann::json(*s).dump() : std::string("null");
  };
  std::string out = "{\"type\":" + nlohmann::json(type).dump();
  out += ",\"success\":";
  out += success ? "true" : "false";
  out += ",\"error\":" + str(error);
  if (!zero_tools) {
    out += ",\"error_code\":" + str(error_code);
    out += ",\"reason\":" + str(reason);
  }
  out += ",\"function_calls\":" + function_calls;
  out += ",\"reasoning\":" + str(reasoning);
  out += confidence ? fmt::format(",\"confidence\":{:.4f}", *confidence)
                    : std::string(",\"confidence\":null");
  out += fmt::format(",\"prefill_tps\":{:.1f},\"decode_tps\":{:.1f},\"peak_ram_mb\":{:.1f}",
                     turn.prefill_tps, zero_tools ? 0.0 : turn.decode_tps, peak_ram_mb);
  if (has_validation) {
    out += ",\"validation\":{\"ungrounded\":" + nlohmann::json(ungrounded).dump() +
           ",\"negation\":" + (negation ? "true" : "false") + "}";
  }
  out += "}";
  return out;
}

}  // namespace needle::session
