// Golden fixture loading and comparisons (golden.h).
#include "model/golden.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace needle::model {

namespace {

std::vector<float> ReadF32(const std::filesystem::path& path, uint32_t vocab) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail<IoError>("{}: cannot open", path.string());
  std::vector<float> v(vocab);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(vocab) * 4);
  if (in.gcount() != static_cast<std::streamsize>(vocab) * 4 || in.peek() != EOF)
    Fail<FormatError>("{}: expected exactly {} f32 logits ({} bytes)", path.string(), vocab,
                      size_t{vocab} * 4);
  return v;
}

std::vector<size_t> TopK(const float* x, size_t n, size_t k) {
  std::vector<size_t> idx(n);
  for (size_t i = 0; i < n; ++i) idx[i] = i;
  k = std::min(k, n);
  std::partial_sort(idx.begin(), idx.begin() + static_cast<long>(k), idx.end(),
                    [x](size_t a, size_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); });
  idx.resize(k);
  return idx;
}

}  // namespace

Golden LoadGolden(const std::string& path, uint32_t vocab) {
  std::ifstream in(path);
  if (!in) Fail<IoError>("{}: cannot open", path);
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    Fail<FormatError>("{}: not valid JSON: {}", path, e.what());
  }
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  Golden g;
  try {
    g.model = j.value("model", "");
    for (const auto& r : j.at("reference")) {
      ReferenceCase c;
      c.ids = r.at("ids").get<std::vector<int32_t>>();
      c.kv_window = r.at("kv_window").get<uint32_t>();
      c.sink_len = r.at("sink_len").get<uint32_t>();
      c.last_logits = ReadF32(dir / r.at("last_logits").get<std::string>(), vocab);
      for (const auto& pos : r.at("top5")) {
        std::vector<TopEntry> top;
        for (const auto& e : pos) top.push_back({e.at(0).get<int32_t>(), e.at(1).get<float>()});
        c.top5.push_back(std::move(top));
      }
      if (c.top5.size() != c.ids.size())
        Fail<FormatError>("{}: reference entry {} has {} top5 rows for {} ids", path,
                          g.reference.size(), c.top5.size(), c.ids.size());
      g.reference.push_back(std::move(c));
    }
    for (const auto& o : j.at("official")) {
      OfficialCase c;
      c.system = o.value("system", "");
      c.query = o.value("query", "");
      c.tools_text = o.value("tools_text", "");
      c.prefix_ids = o.at("prefix_ids").get<std::vector<int32_t>>();
      c.turn_ids = o.at("turn_ids").get<std::vector<int32_t>>();
      c.first_step_logits = ReadF32(dir / o.at("first_step_logits").get<std::string>(), vocab);
      g.official.push_back(std::move(c));
    }
  } catch (const nlohmann::json::exception& e) {
    Fail<FormatError>("{}: unexpected golden layout: {}", path, e.what());
  }
  return g;
}

float MaxAbsDiff(const float* a, const float* b, size_t n) {
  float m = 0.f;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

double Cosine(const float* a, const float* b, size_t n) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < n; ++i) {
    ab += double{a[i]} * b[i];
    aa += double{a[i]} * a[i];
    bb += double{b[i]} * b[i];
  }
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0.0;
}

bool Top5Agrees(const float* ours, size_t vocab, const std::vector<TopEntry>& stored,
                float near_tie) {
  const std::vector<size_t> top = TopK(ours, vocab, stored.size());
  for (size_t k = 0; k < stored.size(); ++k) {
    const int32_t mine = static_cast<int32_t>(top[k]);
    if (mine == stored[k].id) continue;
    const auto it = std::find_if(stored.begin(), stored.end(),
                                 [mine](const TopEntry& e) { return e.id == mine; });
    if (it != stored.end()) {
      if (std::fabs(it->logit - stored[k].logit) <= near_tie) continue;
      return false;
    }
    // Our id is below the stored top-5: acceptable only at the tail of a near-tie, in both runs.
    if (stored[k].logit - stored.back().logit <= near_tie &&
        std::fabs(ours[mine] - ours[stored[k].id]) <= near_tie)
      continue;
    return false;
  }
  return true;
}

ReferenceResult RunReference(const Model& model, const ReferenceCase& c, const Tolerances& tol,
                             int threads, const kernels::KernelTable* kernels, NumericPath path) {
  const uint32_t V = model.geometry().vocab;
  DecoderConfig cfg;
  cfg.path = path;
  cfg.kv_window = c.kv_window;
  cfg.sink_len = c.sink_len;
  cfg.max_positions = static_cast<uint32_t>(c.ids.size());
  cfg.threads = threads;
  cfg.kernels = kernels;
  Decoder dec(model, cfg);
  std::vector<float> all(c.ids.size() * V);
  dec.Prefill(c.ids, {}, all);
  ReferenceResult r;
  r.path = path;
  r.positions = c.ids.size();
  const float* last = all.data() + (c.ids.size() - 1) * V;
  r.max_abs_diff = MaxAbsDiff(last, c.last_logits.data(), V);
  r.cosine = Cosine(last, c.last_logits.data(), V);
  r.top1 = static_cast<int32_t>(TopK(last, V, 1)[0]);
  r.expected_top1 = static_cast<int32_t>(TopK(c.last_logits.data(), V, 1)[0]);
  for (size_t p = 0; p < c.ids.size(); ++p) {
    if (!Top5Agrees(all.data() + p * V, V, c.top5[p], tol.near_tie)) {
      ++r.top5_mismatches;
      if (r.first_mismatch < 0) r.first_mismatch = static_cast<int64_t>(p);
    }
  }
  r.pass = path == NumericPath::kF32
               ? r.max_abs_diff <= tol.reference_max_abs && r.top5_mismatches == 0
               : r.cosine >= tol.cross_cosine && r.top1 == r.expected_top1;
  return r;
}

OfficialResult RunOfficial(const Model& model, const OfficialCase& c, const Tolerances& tol,
                           int threads, const kernels::KernelTable* kernels, NumericPath path) {
  const uint32_t V = model.geometry().vocab;
  DecoderConfig cfg;
  cfg.path = path;
  cfg.kv_window = model.geometry().kv_window;
  cfg.sink_len = static_cast<uint32_t>(c.prefix_ids.size());
  cfg.max_positions = static_cast<uint32_t>(c.prefix_ids.size() + c.turn_ids.size());
  cfg.threads = threads;
  cfg.kernels = kernels;
  Decoder dec(model, cfg);
  std::vector<float> logits(V);
  dec.Prefill(c.prefix_ids, {});
  dec.Prefill(c.turn_ids, logits);
  OfficialResult r;
  r.path = path;
  r.max_abs_diff = MaxAbsDiff(logits.data(), c.first_step_logits.data(), V);
  for (uint32_t i = 0; i < V; ++i)
    r.equal_logits +=
        std::bit_cast<uint32_t>(logits[i]) == std::bit_cast<uint32_t>(c.first_step_logits[i]) ? 1
                                                                                              : 0;
  r.cosine = Cosine(logits.data(), c.first_step_logits.data(), V);
  r.top1 = static_cast<int32_t>(TopK(logits.data(), V, 1)[0]);
  r.expected_top1 = static_cast<int32_t>(TopK(c.first_step_logits.data(), V, 1)[0]);
  r.pass = path == NumericPath::kOfficial
               ? r.equal_logits == V
               : r.cosine >= tol.cross_cosine && r.top1 == r.expected_top1;
  return r;
}

}  // namespace needle::model
