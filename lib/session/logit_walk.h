// Token ids in descending logit order (ties: the smaller id first), handed out one at a time: the
// confidence walk's order (session.cpp). The walk usually stops after a few tokens, so Start()
// keeps only the best kTop ids, sorted, in one pass (most ids cost one comparison against the
// kTop-th); the rest are heaped only if the walk goes past them. The order is a strict total
// order for finite logits, so the ids come out exactly as a full sort would give them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace needle::session {

class LogitWalk {
 public:
  static constexpr size_t kTop = 32;

  // Starts a walk over `ids` (any order, no duplicates) by `logits[id]`. Both must stay alive and
  // unchanged until the walk ends. Allocates only when the walk goes past kTop ids (and then
  // reuses its buffer).
  void Start(const float* logits, std::span<const int32_t> ids);
  // The next id in order; false once every id was handed out.
  bool Next(int32_t* id);

 private:
  // True if a comes before b in the walk.
  bool Before(int32_t a, int32_t b) const {
    return logits_[a] > logits_[b] || (logits_[a] == logits_[b] && a < b);
  }
  void StartRest();

  const float* logits_ = nullptr;
  std::span<const int32_t> ids_;
  std::array<int32_t, kTop> top_{};
  size_t top_n_ = 0, top_pos_ = 0;
  bool rest_started_ = false;
  std::vector<int32_t> rest_;  // the ids after the kTop best, a heap (the next one at the front)
  size_t rest_end_ = 0;
};

}  // namespace needle::session
