// The confidence walk's order (session/logit_walk.h) against a full sort by the same rule.
#include "session/logit_walk.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <vector>

using needle::session::LogitWalk;

namespace {

// Every id the walk hands out, in its order.
std::vector<int32_t> Drain(LogitWalk& walk) {
  std::vector<int32_t> out;
  int32_t id = -1;
  while (walk.Next(&id)) out.push_back(id);
  return out;
}

std::vector<int32_t> Sorted(const std::vector<float>& logits, std::vector<int32_t> ids) {
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  return ids;
}

}  // namespace

TEST_CASE("the logit walk hands out ids in descending logit order, ties by id", "[session]") {
  std::mt19937 rng(7);
  const size_t vocab = 3000;
  // Sizes around the kept best (LogitWalk::kTop) and well past it; few distinct values, so that
  // ties are common, also across the boundary of the kept ids.
  for (const size_t n : {size_t{0}, size_t{1}, size_t{5}, LogitWalk::kTop - 1, LogitWalk::kTop,
                         LogitWalk::kTop + 1, size_t{200}, size_t{3000}}) {
    for (const int levels : {3, 50, 1 << 20}) {
      std::vector<float> logits(vocab);
      std::uniform_int_distribution<int> level(0, levels - 1);
      for (float& x : logits) x = static_cast<float>(level(rng)) * 0.25f - 7.0f;
      std::vector<int32_t> ids(vocab);
      for (size_t i = 0; i < vocab; ++i) ids[i] = static_cast<int32_t>(i);
      std::shuffle(ids.begin(), ids.end(), rng);
      ids.resize(n);
      CAPTURE(n, levels);
      LogitWalk walk;
      walk.Start(logits.data(), ids);
      const std::vector<int32_t> got = Drain(walk);
      CHECK(got == Sorted(logits, ids));
      // A second walk on the same object starts over (no state from the first).
      std::reverse(ids.begin(), ids.end());
      walk.Start(logits.data(), ids);
      CHECK(Drain(walk) == Sorted(logits, ids));
    }
  }
}

TEST_CASE("a walk stopped early and restarted gives the full order again", "[session]") {
  const std::vector<float> logits{1.f, 3.f, 3.f, -2.f, 0.5f, 3.f, 7.f};
  const std::vector<int32_t> ids{0, 1, 2, 3, 4, 5, 6};
  LogitWalk walk;
  walk.Start(logits.data(), ids);
  int32_t id = -1;
  REQUIRE(walk.Next(&id));
  CHECK(id == 6);
  REQUIRE(walk.Next(&id));
  CHECK(id == 1);  // 1, 2 and 5 tie at 3: the smaller id first
  walk.Start(logits.data(), ids);
  CHECK(Drain(walk) == std::vector<int32_t>{6, 1, 2, 5, 0, 4, 3});
}
