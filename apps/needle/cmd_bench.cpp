// needle bench: load time, prefill and decode throughput and peak RSS over a cross product of
// parameters (models x numerics x ISA x threads x prompt tokens x generated tokens), with warm-up,
// repetitions, medians and raw samples (llama-bench style); each row is printed as its point
// finishes. Not a test: numbers depend on the machine.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "base/error.h"
#include "commands.h"
#include "format/cact.h"
#include "format/sha256.h"
#include "kernels/dispatch.h"
#include "model/decoder.h"
#include "options.h"
#include "report/bench_record.h"
#include "report/log.h"
#include "report/system.h"
#include "report/timer.h"

namespace needle::cli {

namespace {

struct BenchArgs {
  std::vector<std::string> models;  // positional MODEL.cact... then -m a.cact,b.cact
  std::vector<std::string> model_list;
  bool no_mmap = false;
  std::vector<int> threads{0};
  std::vector<int> prompt_tokens{128};
  std::vector<int> gen_tokens{32};
  std::vector<std::string> isas;
  std::vector<std::string> numerics{"official"};
  int repetitions = 3;
  int warmup = 1;
  uint32_t seed = 1;
  std::string output = "md";
  bool json = false;
};

// Deterministic prompt of ordinary (non-special) token ids.
std::vector<int32_t> MakePrompt(uint32_t vocab, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  const uint32_t first = std::min<uint32_t>(14, vocab - 1);  // skip pad/eos/bos/unk/markers
  std::uniform_int_distribution<uint32_t> dist(first, vocab - 1);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = static_cast<int32_t>(dist(rng));
  return ids;
}

int32_t Argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

void RunBench(const BenchArgs& a) {
  for (const int n : a.prompt_tokens)
    if (n < 1 || n > static_cast<int>(format::kMaxSeqLen))
      Fail<UsageError>("-p/--prompt-tokens {} is out of range [1, {}]", n, format::kMaxSeqLen);
  for (const int n : a.gen_tokens)
    if (n < 0 || n > static_cast<int>(format::kMaxSeqLen))
      Fail<UsageError>("-n/--gen-tokens {} is out of range [0, {}]", n, format::kMaxSeqLen);
  if (a.repetitions < 1 || a.warmup < 0)
    Fail<UsageError>("-r/--repetitions must be >= 1 and --warmup >= 0 (got {} and {})",
                     a.repetitions, a.warmup);
  std::vector<std::string> models = a.models;
  models.insert(models.end(), a.model_list.begin(), a.model_list.end());
  if (models.empty()) Fail<UsageError>("no model: give MODEL.cact or -m a.cact,b.cact");
  std::vector<std::string> isas = a.isas;
  if (isas.empty()) isas.push_back(kernels::ActiveKernels().isa);
  for (const std::string& isa : isas) (void)kernels::KernelsFor(isa);  // refused before any run
  const bool progress =
      ::isatty(STDERR_FILENO) && a.output == "md" && !a.json && report::LogEnabled("info");

  report::SystemInfo sys = report::GetSystemInfo();
  sys.isas = kernels::AvailableIsas();
  report::BenchWriter writer(report::ParseBenchFormat(a.json ? "json" : a.output), sys);
  auto emit = [](const std::string& text) {
    fmt::print("{}", text);
    std::fflush(stdout);
  };
  emit(writer.Begin());
  for (const std::string& model_path : models) {
    report::Stopwatch load_watch;
    const format::CactFile file = format::CactFile::Open(
        model_path, a.no_mmap ? format::LoadMode::kRead : format::LoadMode::kMmapPrefault);
    const model::Model model(file);
    const double load_seconds = load_watch.Seconds();
    const std::string sha = format::Sha256Hex(file.bytes());
    const auto& g = file.geometry();
    for (const std::string& numerics : a.numerics)
      for (const std::string& isa : isas) {
        const kernels::KernelTable& table = kernels::KernelsFor(isa);
        for (int threads_opt : a.threads) {
          const int threads = threads_opt > 0 ? threads_opt : ThreadArgs{threads_opt}.Resolve();
          for (int pp : a.prompt_tokens) {
            for (int tg : a.gen_tokens) {
              if (pp < 1) Fail<UsageError>("--prompt-tokens must be >= 1 (got {})", pp);
              if (tg < 0) Fail<UsageError>("--gen-tokens must be >= 0 (got {})", tg);
              model::DecoderConfig cfg;
              cfg.kv_window = g.kv_window;
              cfg.sink_len = g.kv_window ? std::min<uint32_t>(static_cast<uint32_t>(pp), 64) : 0;
              cfg.max_positions = static_cast<uint32_t>(pp + tg + 1);
              cfg.threads = threads;
              cfg.kernels = &table;
              cfg.path = model::ParseNumericPath(numerics);
              report::ResetPeakRss();  // per-point peak (earlier points' buffers are freed)
              model::Decoder dec(model, cfg);
              const std::vector<int32_t> prompt = MakePrompt(g.vocab, pp, a.seed);
              std::vector<float> logits(g.vocab);

              report::BenchRecord r;
              r.model = model_path;
              r.model_sha256 = sha;
              r.model_bytes = file.bytes().size();
              r.isa = table.isa;
              r.path = model::NumericPathName(cfg.path);
              r.threads = threads;
              r.prompt_tokens = pp;
              r.gen_tokens = tg;
              r.repetitions = a.repetitions;
              r.load_seconds = load_seconds;
              for (int rep = -a.warmup; rep < a.repetitions; ++rep) {
                if (progress)
                  fmt::print(stderr, "\r{} {} t={} pp={} tg={}: {} {}/{}   ", numerics, table.isa,
                             threads, pp, tg, rep < 0 ? "warm-up" : "run",
                             rep < 0 ? rep + a.warmup + 1 : rep + 1,
                             rep < 0 ? a.warmup : a.repetitions);
                dec.Reset();
                report::Stopwatch pw;
                dec.Prefill(prompt, logits);
                const double prefill_s = pw.Seconds();
                report::Stopwatch dw;
                for (int i = 0; i < tg; ++i) dec.Step(Argmax(logits), logits);
                const double decode_s = dw.Seconds();
                if (rep < 0) continue;
                r.prefill_tok_s.push_back(pp / prefill_s);
                if (tg > 0) r.decode_tok_s.push_back(tg / decode_s);
              }
              r.peak_rss_bytes = report::PeakRssBytes();
              r.weight_bytes_per_token = model::WeightBytesPerToken(
                  model.weights(), cfg.path == model::NumericPath::kOfficial);
              r.read_bytes_per_s = report::MeasureReadBandwidth(r.weight_bytes_per_token, 0.05);
              if (progress) fmt::print(stderr, "\r{:60}\r", "");
              emit(writer.Row(r));
            }
          }
        }
      }
  }
  emit(writer.End());
}

}  // namespace

void RegisterBench(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "bench",
      "Measure load time, prefill/decode throughput and peak RSS (parameter lists run as "
      "a cross product)");
  auto a = std::make_shared<BenchArgs>();
  cmd->add_option("model", a->models, "Model files (.cact); -m adds more")
      ->type_name("MODEL.cact...");
  cmd->add_option("-m,--models", a->model_list,
                  "Models to compare, e.g. a.cact,b.cact (after the MODEL arguments)")
      ->delimiter(',');
  cmd->add_flag("--no-mmap", a->no_mmap,
                "Read the models into memory instead of memory-mapping them");
  cmd->add_option("-t,--threads", a->threads, "Thread counts, e.g. 1,2 (0 = all cores)")
      ->capture_default_str()
      ->delimiter(',')
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--numerics", a->numerics, "Numeric paths, e.g. official,f32")
      ->capture_default_str()
      ->delimiter(',')
      ->check(CLI::IsMember({"official", "f32"}));
  cmd->add_option("-p,--prompt-tokens", a->prompt_tokens, "Prompt lengths to prefill, e.g. 32,128")
      ->capture_default_str()
      ->delimiter(',');
  cmd->add_option("-n,--gen-tokens", a->gen_tokens, "Tokens to decode after the prompt")
      ->capture_default_str()
      ->delimiter(',');
  cmd->add_option("--isa", a->isas,
                  "Kernel ISAs to compare, e.g. scalar,avx2,avx512 or scalar,neon,dotprod "
                  "(default: fastest)")
      ->delimiter(',');
  cmd->add_option("-r,--repetitions", a->repetitions, "Measured repetitions per point")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--warmup", a->warmup, "Unmeasured runs before each point")
      ->capture_default_str()
      ->check(CLI::Range(0, 100));
  cmd->add_option("--seed", a->seed, "Seed of the random prompt ids")->capture_default_str();
  auto* output =
      cmd->add_option("-o,--output", a->output,
                      "Output format: md (Markdown table), json, jsonl, csv, sql (CREATE TABLE + "
                      "INSERTs)")
          ->capture_default_str()
          ->check(CLI::IsMember({"md", "json", "jsonl", "csv", "sql"}));
  cmd->add_flag("--json", a->json, "Same as -o json")->excludes(output);
  cmd->callback([a] { RunBench(*a); });
}

}  // namespace needle::cli
