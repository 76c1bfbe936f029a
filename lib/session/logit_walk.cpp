#include "session/logit_walk.h"

#include <algorithm>

namespace needle::session {

void LogitWalk::Start(const float* logits, std::span<const int32_t> ids) {
  logits_ = logits;
  ids_ = ids;
  top_n_ = 0;
  top_pos_ = 0;
  rest_started_ = false;
  rest_.clear();
  rest_end_ = 0;
  for (const int32_t id : ids) {
    if (top_n_ == kTop && !Before(id, top_[kTop - 1])) continue;  // not among the best kTop
    // Insertion into the sorted best ids (the last one drops out when full).
    size_t i = top_n_ < kTop ? top_n_++ : kTop - 1;
    while (i > 0 && Before(id, top_[i - 1])) {
      top_[i] = top_[i - 1];
      --i;
    }
    top_[i] = id;
  }
}

void LogitWalk::StartRest() {
  rest_started_ = true;
  if (top_n_ < kTop) return;  // every id is in top_
  const int32_t last = top_[kTop - 1];
  for (const int32_t id : ids_)
    if (Before(last, id)) rest_.push_back(id);
  // std heaps put the greatest first: "greatest" = first in the walk.
  std::make_heap(rest_.begin(), rest_.end(), [this](int32_t a, int32_t b) { return Before(b, a); });
  rest_end_ = rest_.size();
}

bool LogitWalk::Next(int32_t* id) {
  if (top_pos_ < top_n_) {
    *id = top_[top_pos_++];
    return true;
  }
  if (!rest_started_) StartRest();
  if (rest_end_ == 0) return false;
  std::pop_heap(rest_.begin(), rest_.begin() + static_cast<std::ptrdiff_t>(rest_end_),
                [this](int32_t a, int32_t b) { return Before(b, a); });
  *id = rest_[--rest_end_];
  return true;
}

}  // namespace needle::session
