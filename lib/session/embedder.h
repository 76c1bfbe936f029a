// The probe heads as user APIs. The contrastive probe head as a text embedding, as tool retrieval
// uses it (PROTOCOL.md section 1): [BOS] + the text (with the tokenizer's dummy prefix, cut to
// max_seq_len) prefilled on a window-less decoder that pools every cell into the heads; the head's
// L2-normalized output. Retrieval embeds each declared tool (its minified JSON,
// text::ToolInventory) and each query this way and ranks tools by dot product. Not thread-safe (one
// decoder).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "model/decoder.h"
#include "text/tokenizer.h"

namespace needle::session {

// Index into Weights::heads of the model's first head of `kind`; -1 when it has none.
int FindHead(const model::Model& model, format::HeadKind kind);

struct EmbedderConfig {
  int threads = 1;
  model::NumericPath numerics = model::NumericPath::kOfficial;
  const kernels::KernelTable* kernels = nullptr;  // nullptr = kernels::ActiveKernels()
};

class ContrastiveEmbedder {
 public:
  // `tokenizer` must outlive the embedder. Throws InvalidInput when the model has no contrastive
  // head.
  ContrastiveEmbedder(std::shared_ptr<const model::Model> model, const text::Tokenizer& tokenizer,
                      int32_t bos, const EmbedderConfig& config);
  std::vector<float> Embed(std::string_view text);  // dim() values, L2-normalized
  size_t dim() const;

 private:
  std::shared_ptr<const model::Model> model_;
  const text::Tokenizer& tokenizer_;
  int32_t bos_;
  size_t head_ = 0;
  std::unique_ptr<model::Decoder> decoder_;  // window-less, pooling
};

// The confidence probe head on a rendered context, as a reply's head confidence uses it: every
// cell of the context (fed from position 0 with the first `sink_len` pinned, under the header's
// window) pooled into the head; the raw logit (the reply's Hc is its sigmoid). The context is fed
// as a session feeds it: `first` in one prefill, then `second` in another (under the official
// numerics the 32-token calls count from each prefill's start, and results depend on them: a
// session prefills its tools prefix, then each turn; a retrieval turn rebuilds the whole context:
// the BOS in one, the rest in another). Not thread-safe.
class ConfidenceScorer {
 public:
  // Throws InvalidInput when the model has no confidence head.
  ConfidenceScorer(std::shared_ptr<const model::Model> model, const EmbedderConfig& config);
  // Throws InvalidInput when the context is empty or longer than max_seq_len, or sink_len exceeds
  // the tokens fed.
  float Logit(std::span<const int32_t> first, std::span<const int32_t> second, uint32_t sink_len);

 private:
  std::shared_ptr<const model::Model> model_;
  size_t head_ = 0;
  std::unique_ptr<model::Decoder> decoder_;
};

}  // namespace needle::session
