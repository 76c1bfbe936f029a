// Session: prefix prefill + snapshot, turn rendering and the greedy decoding loop.
#include "session/session.h"

#include <algorithm>

#include "base/error.h"
#include "report/timer.h"

namespace needle::session {

const char* StopReasonName(StopReason r) {
  switch (r) {
    case StopReason::kEos: return "eos";
    case StopReason::kImEnd: return "im_end";
    case StopReason::kBudget: return "budget";
    case StopReason::kNoCandidate: return "no_candidate";
  }
  return "?";
}

Session::Session(const format::CactFile& file, const SessionConfig& config,
                 std::string_view system, std::string_view tools_json)
    : file_(file),
      tokenizer_(text::Tokenizer::FromCact(file)),
      renderer_(tokenizer_),
      model_(file) {
  tools_text_ = text::RenderToolsText(tools_json);
  prefix_ids_ = renderer_.PrefixIds(system, tools_text_);
  const auto& g = file_.geometry();
  model::DecoderConfig dc;
  dc.kv_window = config.kv_window ? config.kv_window : g.kv_window;
  dc.sink_len = dc.kv_window ? static_cast<uint32_t>(prefix_ids_.size()) : 0;
  dc.max_positions = g.max_seq_len;
  dc.threads = config.threads;
  dc.kernels = config.kernels;
  decoder_ = std::make_unique<model::Decoder>(model_, dc);
  logits_.resize(g.vocab);
  allowed_.resize(g.vocab);
  report::Stopwatch sw;
  decoder_->Prefill(prefix_ids_, logits_);
  prefix_seconds_ = sw.Seconds();
  decoder_->Save(&prefix_snapshot_);
}

void Session::Reset() { decoder_->Restore(prefix_snapshot_); }

TurnResult Session::Complete(std::string_view query, int max_tokens, TokenFilter* filter) {
  Reset();
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
      for (int32_t id = 0; id < static_cast<int32_t>(logits_.size()); ++id)
        if (allowed_[id] && (best < 0 || logits_[id] > logits_[best])) best = id;
    } else {
      best = static_cast<int32_t>(std::max_element(logits_.begin(), logits_.end()) -
                                  logits_.begin());
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

}  // namespace needle::session
