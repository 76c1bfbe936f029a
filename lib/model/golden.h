// Golden fixtures (golden.json next to stored .f32 logits) and the comparisons `needle verify`
// and the tests make against them: last-position logits, top-5 per position with a near-tie rule.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/decoder.h"

namespace needle::model {

struct TopEntry {
  int32_t id;
  float logit;
};

// An upstream f32 reference run.
struct ReferenceCase {
  std::vector<int32_t> ids;
  uint32_t kv_window = 0, sink_len = 0;
  std::vector<float> last_logits;           // [vocab]
  std::vector<std::vector<TopEntry>> top5;  // per position, 5 entries
};

// An official-engine first step after prefix + turn.
struct OfficialCase {
  std::string system, query, tools_text;
  std::vector<int32_t> prefix_ids, turn_ids;
  std::vector<float> first_step_logits;  // [vocab]
};

struct Golden {
  std::string model;  // file name the golden was made for
  std::vector<ReferenceCase> reference;
  std::vector<OfficialCase> official;
};

// Reads golden.json and the .f32 files it names (relative to its folder). Throws IoError /
// FormatError naming the file and field.
Golden LoadGolden(const std::string& path, uint32_t vocab);

// What passes depends on the numeric path: each path must reproduce its own reference exactly
// (official: identical logits, max|diff| 0) or within the f32 tolerance (f32 vs upstream), and
// agree with the other reference as int8 and f32 arithmetic agree (cosine, same top-1).
struct Tolerances {
  float reference_max_abs = 2e-3f;  // f32 path vs upstream f32 logits
  float near_tie = 2e-3f;           // stored logits this close may swap ranks in the top-5
  float cross_cosine = 0.9998f;     // one path vs the other path's reference
};

struct ReferenceResult {
  NumericPath path = NumericPath::kF32;
  float max_abs_diff = 0.f;
  double cosine = 0.0;
  size_t positions = 0;
  size_t top5_mismatches = 0;             // positions whose top-5 differ beyond near-ties
  int64_t first_mismatch = -1;            // position, or -1
  int32_t top1 = -1, expected_top1 = -1;  // at the last position
  bool pass = false;
};

struct OfficialResult {
  NumericPath path = NumericPath::kOfficial;
  float max_abs_diff = 0.f;
  size_t equal_logits = 0;  // logits bit-identical to the engine's
  double cosine = 0.0;
  int32_t top1 = -1, expected_top1 = -1;
  bool pass = false;
};

// Runs a reference case from a fresh decoder (window and sinks from the case) and compares.
// f32 path: max|diff| <= reference_max_abs and the same top-5 at every position (near-ties aside);
// official path: cosine >= cross_cosine and the same top-1 at the last position.
ReferenceResult RunReference(const Model& model, const ReferenceCase& c, const Tolerances& tol,
                             int threads, const kernels::KernelTable* kernels = nullptr,
                             NumericPath path = NumericPath::kF32);
// Runs prefix + turn as the official engine does (prefix pinned as sinks, the header's window).
// Official path: every logit identical (max|diff| == 0); f32 path: cosine >= cross_cosine and the
// same top-1.
OfficialResult RunOfficial(const Model& model, const OfficialCase& c, const Tolerances& tol,
                           int threads, const kernels::KernelTable* kernels = nullptr,
                           NumericPath path = NumericPath::kOfficial);

// Metrics of two logit vectors.
float MaxAbsDiff(const float* a, const float* b, size_t n);
double Cosine(const float* a, const float* b, size_t n);
// True when `ours` ranks the same top-5 as `stored`, allowing swaps between stored near-ties.
bool Top5Agrees(const float* ours, size_t vocab, const std::vector<TopEntry>& stored,
                float near_tie);

}  // namespace needle::model
