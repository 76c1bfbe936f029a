// Contrastive-head text embeddings (see embedder.h).
#include "session/embedder.h"

#include "base/error.h"

namespace needle::session {

namespace {
// A decoder of max_seq_len positions that pools every cell into the probe heads.
model::DecoderConfig PoolingConfig(const model::Model& model, const EmbedderConfig& config) {
  model::DecoderConfig dc;
  dc.max_positions = model.file().geometry().max_seq_len;
  dc.threads = config.threads;
  dc.path = config.numerics;
  dc.kernels = config.kernels;
  dc.pool_heads = true;
  return dc;
}
}  // namespace

int FindHead(const model::Model& model, format::HeadKind kind) {
  const auto& heads = model.weights().heads;
  for (size_t h = 0; h < heads.size(); ++h)
    if (heads[h].kind == kind) return static_cast<int>(h);
  return -1;
}

ContrastiveEmbedder::ContrastiveEmbedder(std::shared_ptr<const model::Model> model,
                                         const text::Tokenizer& tokenizer, int32_t bos,
                                         const EmbedderConfig& config)
    : model_(std::move(model)), tokenizer_(tokenizer), bos_(bos) {
  const int head = FindHead(*model_, format::HeadKind::kContrastive);
  if (head < 0)
    Fail<InvalidInput>("{}: the model has no contrastive head (embeddings need one)",
                       model_->file().path());
  head_ = static_cast<size_t>(head);
  decoder_ = std::make_unique<model::Decoder>(*model_, PoolingConfig(*model_, config));
}

size_t ContrastiveEmbedder::dim() const { return model_->weights().heads[head_].out_dim; }

std::vector<float> ContrastiveEmbedder::Embed(std::string_view text) {
  std::vector<int32_t> ids{bos_};
  tokenizer_.EncodeAppend(text, tokenizer_.add_dummy_prefix(), &ids);
  const size_t limit = model_->file().geometry().max_seq_len;
  if (ids.size() > limit) ids.resize(limit);
  decoder_->Reset();
  decoder_->Prefill(ids, {});
  std::vector<float> e(dim());
  decoder_->HeadOutput(head_, e);
  return e;
}

ConfidenceScorer::ConfidenceScorer(std::shared_ptr<const model::Model> model,
                                   const EmbedderConfig& config)
    : model_(std::move(model)) {
  const int head = FindHead(*model_, format::HeadKind::kConfidence);
  if (head < 0) Fail<InvalidInput>("{}: the model has no confidence head", model_->file().path());
  head_ = static_cast<size_t>(head);
  model::DecoderConfig dc = PoolingConfig(*model_, config);
  dc.kv_window = model_->file().geometry().kv_window;  // as a session's decoder
  dc.max_sink_len = model_->file().geometry().max_seq_len;
  decoder_ = std::make_unique<model::Decoder>(*model_, dc);
}

float ConfidenceScorer::Logit(std::span<const int32_t> first, std::span<const int32_t> second,
                              uint32_t sink_len) {
  const uint32_t limit = model_->file().geometry().max_seq_len;
  const size_t n = first.size() + second.size();
  if (n == 0 || n > limit)
    Fail<InvalidInput>("{}: a context of {} tokens (1 to max_seq_len {} allowed)",
                       model_->file().path(), n, limit);
  if (sink_len > n) Fail<InvalidInput>("sink_len {} exceeds the {} tokens fed", sink_len, n);
  decoder_->Reset();
  if (decoder_->config().kv_window) decoder_->SetSinkLen(sink_len);
  if (!first.empty()) decoder_->Prefill(first, {});
  if (!second.empty()) decoder_->Prefill(second, {});
  float logit = 0;
  decoder_->HeadOutput(head_, {&logit, 1});
  return logit;
}

}  // namespace needle::session
