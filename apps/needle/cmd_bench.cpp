// needle bench: load time, prefill and decode throughput and peak RSS over a cross product of
// parameters (models x numerics x ISA x threads x chunk x prompt tokens x generated tokens), with
// warm-up, repetitions, medians and raw samples (llama-bench style); each row is printed as its
// point finishes. Each repetition times the request as a user sees it: tokenizing the prompt
// text, the prefill, the first token, the decode and the whole (the pg rate). --svg plots tok/s
// against the parameter that varies most; --official adds rows for the official engine (WASM,
// bench_official.cpp). --session TOOLS.json measures the protocol's latencies instead: load, the
// tools prefix's init (computed, and read from a persisted snapshot) and a reply with the prefix
// ready. Not a test: numbers depend on the machine.
#include <fmt/format.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <vector>

#include "base/error.h"
#include "bench_official.h"
#include "commands.h"
#include "format/atomic_file.h"
#include "format/cact.h"
#include "format/sha256.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "model/decoder.h"
#include "options.h"
#include "report/bench_record.h"
#include "report/log.h"
#include "report/session_record.h"
#include "report/svg_plot.h"
#include "report/system.h"
#include "report/timer.h"
#include "session/session.h"
#include "text/tokenizer.h"
#include "version.h"

namespace needle::cli {

namespace {

struct BenchArgs {
  std::vector<std::string> models;  // positional MODEL.cact... then -m a.cact,b.cact
  std::vector<std::string> model_list;
  bool no_mmap = false;
  std::vector<int> threads{0};
  std::vector<int> prompt_tokens{128};
  std::vector<int> gen_tokens{32};
  std::vector<int> chunks;  // prefill tokens per forward call (empty: the path's own, 32)
  std::vector<std::string> isas;
  std::vector<std::string> numerics{"official"};
  int repetitions = 3;
  int warmup = 1;
  uint32_t seed = 1;
  std::string output = "md";
  bool json = false;
  std::string svg_path;
  std::string official_pkg;
  // --session: the protocol scenario.
  std::string session_tools;
  std::vector<std::string> queries;
  std::string system;
  bool gen_tokens_given = false;  // -n given (the session's budget defaults to run's 256)
};

// The session scenario's query when none is given: a typical single-call request.
constexpr const char* kDefaultSessionQuery = "What is the weather like in Paris today?";

// Deterministic prompt of ordinary (non-special) token ids.
std::vector<int32_t> MakePrompt(uint32_t vocab, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  const uint32_t first = std::min<uint32_t>(14, vocab - 1);  // skip pad/eos/bos/unk/markers
  std::uniform_int_distribution<uint32_t> dist(first, vocab - 1);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = static_cast<int32_t>(dist(rng));
  return ids;
}

// Greedy pick, as the engine's decode loop (kernels::ArgMax: std::max_element's index, vectorized;
// the CLI layer is built for size, and the scalar scan was ~2% of a measured decode token).
int32_t Argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(kernels::ArgMax(v.data(), v.size()));
}

// --svg: tok/s against the parameter with the most distinct values (threads, prompt tokens,
// generated tokens, chunk), one series per combination of the others.
std::string PlotRecords(const std::vector<report::BenchRecord>& records) {
  struct Axis {
    const char* label;
    double (*get)(const report::BenchRecord&);
  };
  const Axis axes[] = {
      {"threads", [](const report::BenchRecord& r) { return double(r.threads); }},
      {"prompt tokens", [](const report::BenchRecord& r) { return double(r.prompt_tokens); }},
      {"generated tokens", [](const report::BenchRecord& r) { return double(r.gen_tokens); }},
      {"prefill chunk", [](const report::BenchRecord& r) { return double(r.chunk); }}};
  size_t best = 0, best_count = 0;
  for (size_t k = 0; k < std::size(axes); ++k) {
    std::vector<double> v;
    v.reserve(records.size());
    for (const auto& r : records) v.push_back(axes[k].get(r));
    std::sort(v.begin(), v.end());
    const size_t n = std::unique(v.begin(), v.end()) - v.begin();
    if (n > best_count) best = k, best_count = n;
  }
  report::PlotPanel prefill{"prefill tok/s", "tok/s", {}}, decode{"decode tok/s", "tok/s", {}};
  std::map<std::string, size_t> series_of;
  for (const auto& r : records) {
    std::string label = fmt::format("{} {} {} {}", r.engine, r.model, r.path, r.isa);
    if (best != 0) label += fmt::format(" t={}", r.threads);
    if (best != 1) label += fmt::format(" pp={}", r.prompt_tokens);
    if (best != 2) label += fmt::format(" tg={}", r.gen_tokens);
    if (best != 3) label += fmt::format(" chunk={}", r.chunk);
    auto [it, added] = series_of.emplace(label, prefill.series.size());
    if (added) {
      prefill.series.push_back({label, {}});
      decode.series.push_back({label, {}});
    }
    const double x = axes[best].get(r);
    prefill.series[it->second].points.emplace_back(x, r.prefill_median());
    if (!r.decode_tok_s.empty())
      decode.series[it->second].points.emplace_back(x, r.decode_median());
  }
  return report::RenderSvgPlot("needle bench", axes[best].label, {prefill, decode});
}

// --session: per point (model x numerics x ISA x threads x budget x query) and repetition, in a
// fresh load each time: load (open + weight views), init (a session: tokenizer, prompt, grammar,
// the tools prefix prefilled), one reply with the prefix ready, then init again with the prefix
// read from the snapshot the first init of the point wrote (the prefix cache). One session is
// alive at a time, so the peak RSS is one session's.
void RunSessionBench(const BenchArgs& a, const std::vector<std::string>& models,
                     const std::vector<std::string>& isas, const OfficialBench* official,
                     bool progress, report::SystemInfo sys) {
  const std::string tools_json = ReadTextInput(a.session_tools);
  const std::vector<std::string> queries =
      a.queries.empty() ? std::vector<std::string>{kDefaultSessionQuery} : a.queries;
  if (a.session_tools.empty()) Fail<UsageError>("--session needs a tools file");
  const std::vector<int> budgets = a.gen_tokens_given ? a.gen_tokens : std::vector<int>{256};
  const format::TempDir cache("needle-bench");  // the session bench's prefix snapshots
  report::SessionBenchWriter writer(report::ParseBenchFormat(a.json ? "json" : a.output),
                                    std::move(sys));
  auto emit = [](const std::string& text) {
    fmt::print("{}", text);
    std::fflush(stdout);
  };
  emit(writer.Begin());
  const auto mode = a.no_mmap ? format::LoadMode::kRead : format::LoadMode::kMmap;
  for (const std::string& model_path : models) {
    std::string sha;
    uint64_t model_bytes = 0;
    {
      const format::CactFile file = format::CactFile::Open(model_path, mode);
      sha = file.Sha256Hex();
      model_bytes = file.bytes().size();
      for (const int budget : budgets)
        if (budget > static_cast<int>(file.geometry().max_seq_len))
          Fail<UsageError>("-n/--gen-tokens {} is above the model's max_seq_len {} ({})", budget,
                           file.geometry().max_seq_len, model_path);
    }
    for (const std::string& numerics : a.numerics)
      for (const std::string& isa : isas)
        for (int threads_opt : a.threads)
          for (int budget : budgets)
            for (const std::string& query : queries) {
              session::SessionConfig cfg;
              cfg.threads = threads_opt > 0 ? threads_opt : ThreadArgs{threads_opt}.Resolve();
              cfg.numerics = model::ParseNumericPath(numerics);
              cfg.kernels = &kernels::KernelsFor(isa);
              session::SessionConfig cached_cfg = cfg;
              cached_cfg.prefix_cache_dir = cache.path().string();
              std::filesystem::remove_all(cache.path());  // this point's first init writes it

              report::SessionBenchRecord r;
              r.model = model_path;
              r.model_sha256 = sha;
              r.model_bytes = model_bytes;
              r.isa = cfg.kernels->isa;
              r.path = model::NumericPathName(cfg.numerics);
              r.threads = cfg.threads;
              r.repetitions = a.repetitions;
              r.budget = budget;
              r.query = query;
              report::ResetPeakRss();
              for (int rep = -a.warmup; rep < a.repetitions; ++rep) {
                if (progress)
                  fmt::print(stderr, "\r{} {} t={} session: {} {}/{}   ", numerics, r.isa,
                             r.threads, rep < 0 ? "warm-up" : "run",
                             rep < 0 ? rep + a.warmup + 1 : rep + 1,
                             rep < 0 ? a.warmup : a.repetitions);
                report::Stopwatch load_watch;
                const format::CactFile file = format::CactFile::Open(model_path, mode);
                const auto model = std::make_shared<const model::Model>(file);
                const double load_s = load_watch.Seconds();
                double init_s = 0, reply_s = 0, cached_s = 0;
                {
                  report::Stopwatch watch;
                  session::Session s(file, model, cfg, a.system, tools_json);
                  init_s = watch.Seconds();
                  watch = report::Stopwatch();
                  const session::Reply reply = s.Respond(query, budget);
                  reply_s = watch.Seconds();
                  r.prefix_tokens = static_cast<int>(s.prefix_ids().size());
                  r.turn_tokens = static_cast<int>(reply.turn.turn_ids.size());
                  r.reply_tokens = reply.counted_tokens;
                  r.reply_type = reply.type;
                }
                if (rep == -a.warmup)  // writes the snapshot the cached inits read
                  const session::Session writes(file, model, cached_cfg, a.system, tools_json);
                {
                  report::Stopwatch watch;
                  const session::Session s(file, model, cached_cfg, a.system, tools_json);
                  cached_s = watch.Seconds();
                  if (!s.prefix_from_cache())
                    Fail<IoError>("the tools prefix snapshot in {} was not read back ({})",
                                  cache.path().string(), model_path);
                }
                if (rep < 0) continue;
                r.load_s.push_back(load_s);
                r.init_s.push_back(init_s);
                r.reply_s.push_back(reply_s);
                r.init_cached_s.push_back(cached_s);
              }
              r.peak_rss_bytes = report::PeakRssBytes();
              if (progress) fmt::print(stderr, "\r{:60}\r", "");
              emit(writer.Row(r));
            }
    if (official)
      for (int budget : budgets)
        for (const std::string& query : queries) {
          if (progress) fmt::print(stderr, "\rofficial engine session   ");
          const report::SessionBenchRecord r =
              official->RunSession(model_path, sha, model_bytes, tools_json, a.system, query,
                                   budget, a.repetitions, a.warmup);
          if (progress) fmt::print(stderr, "\r{:60}\r", "");
          emit(writer.Row(r));
        }
  }
  emit(writer.End());
}

void RunBench(const BenchArgs& a) {
  for (const int n : a.prompt_tokens)
    if (n < 1 || n > static_cast<int>(format::kMaxSeqLen))
      Fail<UsageError>("-p/--prompt-tokens {} is out of range [1, {}]", n, format::kMaxSeqLen);
  for (const int n : a.gen_tokens)
    if (n < 0 || n > static_cast<int>(format::kMaxSeqLen))
      Fail<UsageError>("-n/--gen-tokens {} is out of range [0, {}]", n, format::kMaxSeqLen);
  for (const int c : a.chunks)
    if (c < 1 || c > 512) Fail<UsageError>("--chunk {} is out of range [1, 512]", c);
  const bool custom_chunk =
      std::any_of(a.chunks.begin(), a.chunks.end(), [](int c) { return c != 32; });
  if (custom_chunk &&
      std::find(a.numerics.begin(), a.numerics.end(), "official") != a.numerics.end())
    Fail<UsageError>(
        "--chunk other than 32 applies to --numerics f32 only (the official path prefills in the "
        "engine's 32-token calls: with a window the result depends on it)");
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
  sys.commit = GitCommit();
  sys.build_type = BuildType();
  std::optional<OfficialBench> official;
  if (!a.official_pkg.empty()) official.emplace(a.official_pkg);  // checks node and the package
  if (!a.session_tools.empty())
    return RunSessionBench(a, models, isas, official ? &*official : nullptr, progress,
                           std::move(sys));
  const std::vector<int> chunks = a.chunks.empty() ? std::vector<int>{32} : a.chunks;
  report::BenchWriter writer(report::ParseBenchFormat(a.json ? "json" : a.output), sys);
  std::vector<report::BenchRecord> records;
  auto emit = [](const std::string& text) {
    fmt::print("{}", text);
    std::fflush(stdout);
  };
  emit(writer.Begin());
  for (const std::string& model_path : models) {
    // Load = open + weight views, timed -r times (one sample varied 2-24 ms on a shared VM): the
    // median; the last load serves the points.
    const auto mode = a.no_mmap ? format::LoadMode::kRead : format::LoadMode::kMmap;
    std::vector<double> load_samples;
    for (int i = 1; i < a.repetitions; ++i) {
      report::Stopwatch watch;
      const format::CactFile f = format::CactFile::Open(model_path, mode);
      const model::Model m(f);
      load_samples.push_back(watch.Seconds());
    }
    report::Stopwatch load_watch;
    const format::CactFile file = format::CactFile::Open(model_path, mode);
    const model::Model model(file);
    load_samples.push_back(load_watch.Seconds());
    const double load_seconds = report::Median(load_samples);
    const std::string sha = file.Sha256Hex();
    const auto& g = file.geometry();
    const text::Tokenizer tokenizer = text::Tokenizer::FromCact(file);
    for (const std::string& numerics : a.numerics)
      for (const std::string& isa : isas) {
        const kernels::KernelTable& table = kernels::KernelsFor(isa);
        for (int threads_opt : a.threads) {
          const int threads = threads_opt > 0 ? threads_opt : ThreadArgs{threads_opt}.Resolve();
          for (int chunk : chunks) {
            for (int pp : a.prompt_tokens) {
              for (int tg : a.gen_tokens) {
                model::DecoderConfig cfg;
                cfg.kv_window = g.kv_window;
                cfg.sink_len = g.kv_window ? std::min<uint32_t>(static_cast<uint32_t>(pp), 64) : 0;
                cfg.max_positions = static_cast<uint32_t>(pp + tg + 1);
                cfg.max_batch = static_cast<uint32_t>(chunk);
                cfg.threads = threads;
                cfg.kernels = &table;
                cfg.path = model::ParseNumericPath(numerics);
                report::ResetPeakRss();  // per-point peak (earlier points' buffers are freed)
                model::Decoder dec(model, cfg);
                const std::vector<int32_t> prompt = MakePrompt(g.vocab, pp, a.seed);
                // The prompt as text, so that each repetition also times its tokenizing (the ids
                // prefilled stay `prompt`: pp is exact).
                const std::string prompt_text = tokenizer.Decode(prompt);
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
                r.chunk = chunk;
                r.repetitions = a.repetitions;
                r.load_seconds = load_seconds;
                for (int rep = -a.warmup; rep < a.repetitions; ++rep) {
                  if (progress)
                    fmt::print(stderr, "\r{} {} t={} pp={} tg={}: {} {}/{}   ", numerics, table.isa,
                               threads, pp, tg, rep < 0 ? "warm-up" : "run",
                               rep < 0 ? rep + a.warmup + 1 : rep + 1,
                               rep < 0 ? a.warmup : a.repetitions);
                  dec.Reset();
                  report::Stopwatch total;
                  const std::vector<int32_t> encoded = tokenizer.Encode(prompt_text);
                  const double tokenize_s = total.Seconds();
                  report::Stopwatch pw;
                  dec.Prefill(prompt, logits);
                  const double prefill_s = pw.Seconds();
                  int32_t next = Argmax(logits);
                  const double first_token_s = total.Seconds();
                  report::Stopwatch dw;
                  for (int i = 0; i < tg; ++i) {
                    dec.Step(next, logits);
                    next = Argmax(logits);
                  }
                  const double decode_s = dw.Seconds();
                  const double total_s = total.Seconds();
                  if (rep < 0 || encoded.empty()) continue;
                  r.tokenize_s.push_back(tokenize_s);
                  r.prefill_tok_s.push_back(pp / prefill_s);
                  r.first_token_s.push_back(first_token_s);
                  r.total_s.push_back(total_s);
                  if (tg > 0) r.decode_tok_s.push_back(tg / decode_s);
                }
                r.peak_rss_bytes = report::PeakRssBytes();
                r.weight_bytes_per_token = model::WeightBytesPerToken(
                    model.weights(), cfg.path == model::NumericPath::kOfficial);
                if (tg > 0) {  // decode steps at positions pp .. pp + tg - 1
                  uint64_t kv = 0;
                  for (int i = 0; i < tg; ++i)
                    kv += dec.StepKvReadBytes(static_cast<uint32_t>(pp + i));
                  r.kv_bytes_per_token = kv / static_cast<uint64_t>(tg);
                }
                r.read_bytes_per_s = report::MeasureReadBandwidth(r.weight_bytes_per_token, 0.05);
                // The int8 compute ceiling: the official path's products against the table's
                // int8 product at its peak (the f32 path's are f32: no such ceiling).
                if (cfg.path == model::NumericPath::kOfficial && table.mac_peak) {
                  r.macs_per_token = model::CqMacsPerToken(model.weights(), true);
                  r.macs_per_s =
                      report::MeasureRate([&table] { return table.mac_peak(1u << 16); }, 0.05);
                }
                if (progress) fmt::print(stderr, "\r{:60}\r", "");
                emit(writer.Row(r));
                records.push_back(std::move(r));
              }
            }
          }
        }
      }
    if (official) {
      for (int pp : a.prompt_tokens)
        for (int tg : a.gen_tokens) {
          if (progress) fmt::print(stderr, "\rofficial engine pp={} tg={}   ", pp, tg);
          report::BenchRecord r = official->Run(model_path, sha, file.bytes().size(),
                                                tokenizer.Decode(MakePrompt(g.vocab, pp, a.seed)),
                                                pp, tg, a.repetitions, a.warmup);
          if (progress) fmt::print(stderr, "\r{:60}\r", "");
          emit(writer.Row(r));
          records.push_back(std::move(r));
        }
    }
  }
  emit(writer.End());
  if (!a.svg_path.empty()) {
    const std::string svg = PlotRecords(records);
    format::WriteFileAtomic(a.svg_path, {reinterpret_cast<const uint8_t*>(svg.data()), svg.size()});
  }
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
  auto* prompt_opt = cmd->add_option("-p,--prompt-tokens", a->prompt_tokens,
                                     "Prompt lengths to prefill, e.g. 32,128")
                         ->capture_default_str()
                         ->delimiter(',');
  auto* gen_opt = cmd->add_option("-n,--gen-tokens", a->gen_tokens,
                                  "Tokens to decode after the prompt (--session: the reply's "
                                  "budget, default 256)")
                      ->capture_default_str()
                      ->delimiter(',');
  auto* chunk_opt =
      cmd->add_option("--chunk", a->chunks,
                      "Prefill tokens per forward call, e.g. 8,32 (f32 numerics; official: 32)")
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
  auto* seed_opt =
      cmd->add_option("--seed", a->seed, "Seed of the random prompt ids")->capture_default_str();
  auto* output =
      cmd->add_option("-o,--output", a->output,
                      "Output format: md (Markdown table), json, jsonl, csv, sql (CREATE TABLE + "
                      "INSERTs)")
          ->capture_default_str()
          ->check(CLI::IsMember({"md", "json", "jsonl", "csv", "sql"}));
  cmd->add_flag("--json", a->json, "Same as -o json")->excludes(output);
  auto* svg_opt =
      cmd->add_option("--svg", a->svg_path,
                      "Also write a plot of prefill and decode tok/s against the parameter that "
                      "varies most (threads, prompt tokens, ...)")
          ->type_name("FILE.svg");
  cmd->add_option("--official", a->official_pkg,
                  "Add rows for the official engine (WASM, run with node) from this npm package "
                  "folder (node_modules/@tyler71/cactus-needle2), on the same prompts (with "
                  "--session: the same tools and queries)")
      ->type_name("PKG_DIR");
  auto* session_opt =
      cmd->add_option("--session", a->session_tools,
                      "Measure the protocol instead: load, init (the tools prefix computed and "
                      "read from a snapshot) and one reply per query, with these tools")
          ->type_name("TOOLS.json");
  for (CLI::Option* other : {prompt_opt, chunk_opt, seed_opt, svg_opt})
    session_opt->excludes(other);
  cmd->add_option("--query", a->queries,
                  "--session: the user turn (repeat for more; default: \"What is the weather like "
                  "in Paris today?\")")
      ->needs(session_opt)
      ->type_name("TEXT");
  cmd->add_option("--system", a->system, "--session: the system prompt")
      ->needs(session_opt)
      ->type_name("TEXT");
  cmd->callback([a, gen_opt] {
    a->gen_tokens_given = gen_opt->count() > 0;
    RunBench(*a);
  });
}

}  // namespace needle::cli
