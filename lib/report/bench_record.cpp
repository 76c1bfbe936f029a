// Bench record renderers.
#include "report/bench_record.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "report/table.h"
#include "report/timer.h"

namespace needle::report {

double BenchRecord::prefill_median() const { return Median(prefill_tok_s); }
double BenchRecord::decode_median() const { return Median(decode_tok_s); }
double BenchRecord::decode_ceiling_tok_s() const {
  return weight_bytes_per_token ? read_bytes_per_s / static_cast<double>(weight_bytes_per_token)
                                : 0.0;
}

namespace {
// Percent of the read ceiling reached by the decode median (0 without a measurement).
double PercentOfCeiling(const BenchRecord& r) {
  const double c = r.decode_ceiling_tok_s();
  return c > 0 ? 100.0 * r.decode_median() / c : 0.0;
}
}  // namespace

BenchFormat ParseBenchFormat(const std::string& s) {
  if (s == "md") return BenchFormat::kMarkdown;
  if (s == "json") return BenchFormat::kJson;
  if (s == "jsonl") return BenchFormat::kJsonl;
  if (s == "csv") return BenchFormat::kCsv;
  Fail<UsageError>("unknown output format '{}' (expected md, json, jsonl or csv)", s);
}

nlohmann::ordered_json ToJson(const BenchRecord& r) {
  nlohmann::ordered_json j;
  j["model"] = r.model;
  j["model_sha256"] = r.model_sha256;
  j["isa"] = r.isa;
  j["path"] = r.path;
  j["threads"] = r.threads;
  j["prompt_tokens"] = r.prompt_tokens;
  j["gen_tokens"] = r.gen_tokens;
  j["repetitions"] = r.repetitions;
  j["load_seconds"] = r.load_seconds;
  j["prefill_tok_s"] = r.prefill_median();
  j["decode_tok_s"] = r.decode_median();
  j["prefill_tok_s_mad"] = MedianAbsDeviation(r.prefill_tok_s);
  j["decode_tok_s_mad"] = MedianAbsDeviation(r.decode_tok_s);
  j["prefill_samples"] = r.prefill_tok_s;
  j["decode_samples"] = r.decode_tok_s;
  j["peak_rss_bytes"] = r.peak_rss_bytes;
  j["model_bytes"] = r.model_bytes;
  j["weight_bytes_per_token"] = r.weight_bytes_per_token;
  j["read_gb_s"] = r.read_bytes_per_s / 1e9;
  j["decode_ceiling_tok_s"] = r.decode_ceiling_tok_s();
  j["decode_pct_of_ceiling"] = PercentOfCeiling(r);
  return j;
}

namespace {
nlohmann::ordered_json SystemJson(const SystemInfo& s) {
  nlohmann::ordered_json j = {{"cpu", s.cpu_model},
                              {"logical_cores", s.logical_cores},
                              {"os", s.os},
                              {"compiler", s.compiler},
                              {"needle_version", s.version}};
  if (!s.isas.empty()) j["isas"] = s.isas;
  return j;
}
}  // namespace

std::string Render(const std::vector<BenchRecord>& records, const SystemInfo& sys, BenchFormat f) {
  switch (f) {
    case BenchFormat::kJson: {
      nlohmann::ordered_json j;
      j["system"] = SystemJson(sys);
      j["records"] = nlohmann::ordered_json::array();
      for (const auto& r : records) j["records"].push_back(ToJson(r));
      return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    }
    case BenchFormat::kJsonl: {
      std::string out;
      for (const auto& r : records) {
        auto j = ToJson(r);
        j["system"] = SystemJson(sys);
        out += j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
      }
      return out;
    }
    case BenchFormat::kCsv: {
      std::string out =
          "model,isa,path,threads,prompt_tokens,gen_tokens,repetitions,load_seconds,"
          "prefill_tok_s,decode_tok_s,peak_rss_bytes,decode_ceiling_tok_s,cpu\n";
      for (const auto& r : records)
        out += fmt::format("\"{}\",{},{},{},{},{},{},{:.4f},{:.2f},{:.2f},{},{:.2f},\"{}\"\n",
                           r.model, r.isa, r.path, r.threads, r.prompt_tokens, r.gen_tokens,
                           r.repetitions, r.load_seconds, r.prefill_median(), r.decode_median(),
                           r.peak_rss_bytes, r.decode_ceiling_tok_s(), sys.cpu_model);
      return out;
    }
    case BenchFormat::kMarkdown: {
      using A = Table::Align;
      Table t({"isa", "path", "threads", "pp", "tg", "load s", "prefill tok/s", "decode tok/s",
               "% of read ceiling", "peak RSS MiB"},
              {A::kLeft, A::kLeft, A::kRight, A::kRight, A::kRight, A::kRight, A::kRight, A::kRight,
               A::kRight, A::kRight});
      for (const auto& r : records)
        t.AddRow(
            {r.isa, r.path, std::to_string(r.threads), std::to_string(r.prompt_tokens),
             std::to_string(r.gen_tokens), fmt::format("{:.3f}", r.load_seconds),
             fmt::format("{:.1f} ± {:.1f}", r.prefill_median(),
                         MedianAbsDeviation(r.prefill_tok_s)),
             fmt::format("{:.1f} ± {:.1f}", r.decode_median(), MedianAbsDeviation(r.decode_tok_s)),
             r.decode_ceiling_tok_s() > 0
                 ? fmt::format("{:.0f}% of {:.0f}", PercentOfCeiling(r), r.decode_ceiling_tok_s())
                 : std::string("-"),
             fmt::format("{:.1f}", double(r.peak_rss_bytes) / (1024.0 * 1024.0))});
      std::string out = fmt::format("cpu: {} ({} logical cores), {}, {}\n", sys.cpu_model,
                                    sys.logical_cores, sys.os, sys.compiler);
      if (!sys.isas.empty())
        out += fmt::format("kernel ISAs available: {}\n", fmt::join(sys.isas, ", "));
      if (!records.empty()) {
        out += fmt::format("model: {}\n", records.front().model);
        const BenchRecord& r = records.front();
        if (r.weight_bytes_per_token)
          out += fmt::format(
              "read ceiling: a decoded token reads {:.2f} MB of weights; one thread reads a buffer "
              "that size at {:.1f} GB/s (measured after each point)\n",
              r.weight_bytes_per_token / 1e6, r.read_bytes_per_s / 1e9);
      }
      return out + t.Render();
    }
  }
  return {};
}

}  // namespace needle::report
