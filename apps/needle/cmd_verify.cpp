// needle verify: checks a model file and this build on this machine — file validation and
// SHA-256, kernels against the scalar reference on the model's own tensors, code-domain products
// against decoded rows, and (with --golden) the forward pass against stored reference logits.
#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "commands.h"
#include "format/cact.h"
#include "format/sha256.h"
#include "kernels/dispatch.h"
#include "model/decoder.h"
#include "model/golden.h"
#include "model/selfcheck.h"
#include "options.h"
#include "text/prompt.h"
#include "text/tokenizer.h"

namespace needle::cli {

namespace {

using nlohmann::ordered_json;

struct VerifyArgs {
  ModelArgs model;
  OutputArgs output;
  ThreadArgs threads;
  NumericsArgs numerics;
  std::string golden;
  std::string isa;
  model::Tolerances tol;
};

// Whether the ids this project renders from an official entry's system / tools_text / query
// equal the engine's stored prefix_ids and turn_ids.
bool RenderedIdsMatch(const text::PromptRenderer& renderer, const model::OfficialCase& c) {
  const std::string tools = text::RenderToolsText(c.tools_text);
  return renderer.PrefixIds(c.system, tools) == c.prefix_ids &&
         renderer.FirstTurnIds(c.query) == c.turn_ids;
}

ordered_json Run(const VerifyArgs& a) {
  if (!a.isa.empty()) kernels::SelectIsa(a.isa);
  const format::LoadMode mode = a.model.no_mmap ? format::LoadMode::kRead : format::LoadMode::kMmap;
  const format::CactFile file = format::CactFile::Open(a.model.path, mode);
  const int threads = a.threads.Resolve();
  bool pass = true;

  ordered_json j;
  j["model"] = a.model.path;
  j["file"] = {
      {"valid", true}, {"bytes", file.bytes().size()}, {"sha256", format::Sha256Hex(file.bytes())}};
  j["isa"] = kernels::ActiveKernels().isa;
  j["available_isas"] = kernels::AvailableIsas();
  j["threads"] = threads;
  const model::NumericPath path = model::ParseNumericPath(a.numerics.numerics);
  j["numerics"] = model::NumericPathName(path);

  // Kernels vs the scalar reference.
  ordered_json kj = ordered_json::array();
  bool kernels_pass = true;
  double kernels_worst = 0;
  for (const auto& c : model::CheckKernels(file)) {
    kj.push_back({{"tensor", c.tensor},
                  {"isa", c.isa},
                  {"outputs", c.rows_checked},
                  {"max_rel_diff", c.max_rel_diff},
                  {"pass", c.pass}});
    kernels_pass &= c.pass;
    kernels_worst = std::max(kernels_worst, c.max_rel_diff);
  }
  j["kernels"] = {{"tolerance_rel", model::kKernelRelTolerance},
                  {"max_rel_diff", kernels_worst},
                  {"pass", kernels_pass},
                  {"tensors", kj}};
  pass &= kernels_pass;

  // Code-domain products vs decoded rows.
  ordered_json dj = ordered_json::array();
  bool decode_pass = true;
  double decode_worst = 0;
  for (const auto& c : model::CheckDecodedProducts(file)) {
    dj.push_back({{"tensor", c.tensor},
                  {"rows", c.rows_checked},
                  {"max_rel_diff", c.max_rel_diff},
                  {"pass", c.pass}});
    decode_pass &= c.pass;
    decode_worst = std::max(decode_worst, c.max_rel_diff);
  }
  j["decode"] = {{"tolerance_rel", model::kDecodeRelTolerance},
                 {"max_rel_diff", decode_worst},
                 {"pass", decode_pass},
                 {"tensors", dj}};
  pass &= decode_pass;

  // CQ round trip of sampled rows through lib/quant.
  ordered_json rj = ordered_json::array();
  bool rt_pass = true;
  double rt_decode = 0, rt_match = 1, rt_err = 0;
  for (const auto& c : model::CheckCqRoundTrip(file)) {
    rj.push_back({{"tensor", c.tensor},
                  {"rows", c.rows_checked},
                  {"decode_max_rel_diff", c.decode_max_rel_diff},
                  {"code_match", c.code_match},
                  {"norm_max_rel_diff", c.norm_max_rel_diff},
                  {"pass", c.pass}});
    rt_pass &= c.pass;
    rt_decode = std::max(rt_decode, c.decode_max_rel_diff);
    rt_match = std::min(rt_match, c.code_match);
    rt_err = std::max(rt_err, c.norm_max_rel_diff);
  }
  j["cq_round_trip"] = {{"decode_tolerance_rel", model::kRoundTripDecodeRelTolerance},
                        {"min_code_match", model::kRoundTripMinCodeMatch},
                        {"norm_tolerance_rel", model::kRoundTripNormRelTolerance},
                        {"decode_max_rel_diff", rt_decode},
                        {"worst_code_match", rt_match},
                        {"norm_max_rel_diff", rt_err},
                        {"pass", rt_pass},
                        {"tensors", rj}};
  pass &= rt_pass;

  if (!a.golden.empty()) {
    const model::Model m(file);
    const model::Golden g = model::LoadGolden(a.golden, file.geometry().vocab);
    const text::Tokenizer tokenizer = text::Tokenizer::FromCact(file);
    const text::PromptRenderer renderer(tokenizer);
    ordered_json gj;
    gj["path"] = a.golden;
    gj["model"] = g.model;
    gj["tolerances"] = {{"reference_max_abs", a.tol.reference_max_abs},
                        {"near_tie", a.tol.near_tie},
                        {"cross_cosine", a.tol.cross_cosine}};
    ordered_json refs = ordered_json::array();
    for (size_t i = 0; i < g.reference.size(); ++i) {
      const auto& c = g.reference[i];
      const auto r = model::RunReference(m, c, a.tol, threads, nullptr, path);
      refs.push_back({{"index", i},
                      {"ids", c.ids.size()},
                      {"kv_window", c.kv_window},
                      {"sink_len", c.sink_len},
                      {"max_abs_diff", r.max_abs_diff},
                      {"cosine", r.cosine},
                      {"top5_mismatches", r.top5_mismatches},
                      {"first_top5_mismatch", r.first_mismatch},
                      {"top1", r.top1},
                      {"expected_top1", r.expected_top1},
                      {"pass", r.pass}});
      pass &= r.pass;
    }
    gj["reference"] = refs;
    ordered_json offs = ordered_json::array();
    for (size_t i = 0; i < g.official.size(); ++i) {
      const auto& c = g.official[i];
      const auto r = model::RunOfficial(m, c, a.tol, threads, nullptr, path);
      const bool rendered = RenderedIdsMatch(renderer, c);
      ordered_json oj = {{"index", i},
                         {"prefix_ids", c.prefix_ids.size()},
                         {"turn_ids", c.turn_ids.size()},
                         {"cosine", r.cosine},
                         {"max_abs_diff", r.max_abs_diff},
                         {"equal_logits", r.equal_logits},
                         {"top1", r.top1},
                         {"expected_top1", r.expected_top1},
                         {"rendered_ids_match", rendered},
                         {"pass", r.pass && rendered}};
      offs.push_back(oj);
      pass &= r.pass && rendered;
    }
    gj["official"] = offs;
    j["golden"] = gj;
  }
  j["pass"] = pass;
  return j;
}

void PrintHuman(const ordered_json& j) {
  fmt::print("model    {}\n", j["model"].get<std::string>());
  fmt::print("file     valid, {} bytes, sha256 {}\n", j["file"]["bytes"].get<uint64_t>(),
             j["file"]["sha256"].get<std::string>());
  fmt::print("isa      {} (threads {}), numerics {}\n", j["isa"].get<std::string>(),
             j["threads"].get<int>(), j["numerics"].get<std::string>());
  const auto& k = j["kernels"];
  fmt::print("kernels  {} tensor checks vs scalar, max rel diff {:.3g} (limit {:.0e}): {}\n",
             k["tensors"].size(), k["max_rel_diff"].get<double>(), k["tolerance_rel"].get<double>(),
             k["pass"].get<bool>() ? "ok" : "FAIL");
  for (const auto& t : k["tensors"])
    if (!t["pass"].get<bool>())
      fmt::print("  FAIL {} [{}]: max rel diff {:.3g}\n", t["tensor"].get<std::string>(),
                 t["isa"].get<std::string>(), t["max_rel_diff"].get<double>());
  const auto& d = j["decode"];
  fmt::print(
      "decode   {} tensors, code-domain product vs decoded rows, max rel diff {:.3g} "
      "(limit {:.0e}): {}\n",
      d["tensors"].size(), d["max_rel_diff"].get<double>(), d["tolerance_rel"].get<double>(),
      d["pass"].get<bool>() ? "ok" : "FAIL");
  const auto& q = j["cq_round_trip"];
  fmt::print(
      "cq       {} tensors round-tripped through lib/quant: decoders agree to {:.3g}, codes "
      "kept >= {:.4f}, norms agree to {:.3g}: {}\n",
      q["tensors"].size(), q["decode_max_rel_diff"].get<double>(),
      q["worst_code_match"].get<double>(), q["norm_max_rel_diff"].get<double>(),
      q["pass"].get<bool>() ? "ok" : "FAIL");
  for (const auto& t : q["tensors"])
    if (!t["pass"].get<bool>())
      fmt::print("  FAIL {}: decode diff {:.3g}, codes kept {:.4f}, norms {:.3g}\n",
                 t["tensor"].get<std::string>(), t["decode_max_rel_diff"].get<double>(),
                 t["code_match"].get<double>(), t["norm_max_rel_diff"].get<double>());
  if (j.contains("golden")) {
    const auto& g = j["golden"];
    fmt::print("golden   {}\n", g["path"].get<std::string>());
    for (const auto& r : g["reference"])
      fmt::print(
          "  reference {}: {} ids, window {}, sinks {}: max|diff| {:.3g}, cosine {:.8f}, "
          "top-5 mismatches {}, top-1 {} vs {}: {}\n",
          r["index"].get<int>(), r["ids"].get<int>(), r["kv_window"].get<int>(),
          r["sink_len"].get<int>(), r["max_abs_diff"].get<double>(), r["cosine"].get<double>(),
          r["top5_mismatches"].get<int>(), r["top1"].get<int>(), r["expected_top1"].get<int>(),
          r["pass"].get<bool>() ? "ok" : "FAIL");
    for (const auto& o : g["official"])
      fmt::print(
          "  official {}: {}+{} ids: cosine {:.6f}, max|diff| {:.3g}, {} identical logits, "
          "top-1 {} vs {}, rendered ids {}: {}\n",
          o["index"].get<int>(), o["prefix_ids"].get<int>(), o["turn_ids"].get<int>(),
          o["cosine"].get<double>(), o["max_abs_diff"].get<double>(), o["equal_logits"].get<int>(),
          o["top1"].get<int>(), o["expected_top1"].get<int>(),
          o["rendered_ids_match"].get<bool>() ? "equal" : "DIFFER",
          o["pass"].get<bool>() ? "ok" : "FAIL");
  }
  fmt::print("{}\n", j["pass"].get<bool>() ? "PASS" : "FAIL");
}

}  // namespace

void RegisterVerify(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "verify", "Check a model and this build: file, kernels, and logits against a golden");
  auto args = std::make_shared<VerifyArgs>();
  args->model.Attach(cmd);
  args->output.Attach(cmd);
  args->threads.Attach(cmd);
  args->numerics.Attach(cmd);
  auto* golden =
      cmd->add_option("--golden", args->golden,
                      "golden.json with reference/official entries (logit files next to it)")
          ->check(CLI::ExistingFile);
  cmd->add_option("--isa", args->isa,
                  "Force a kernel ISA (scalar, avx2, avx512, neon, dotprod); default: fastest");
  // The tolerances apply to golden entries only: without --golden they would be ignored.
  auto* max_abs =
      cmd->add_option("--max-abs", args->tol.reference_max_abs,
                      "f32 numerics, reference entries: max |diff| of the last-position logits")
          ->default_val(args->tol.reference_max_abs)
          ->needs(golden);
  cmd->add_option("--near-tie", args->tol.near_tie,
                  "f32 numerics, reference entries: stored logits this close may swap in the top-5")
      ->default_val(args->tol.near_tie)
      ->needs(golden);
  cmd->add_option("--min-cosine", args->tol.cross_cosine,
                  "Entries of the other path's reference (official numerics vs upstream f32, or "
                  "f32 vs the engine): minimum cosine (and the same top-1)")
      ->default_val(args->tol.cross_cosine)
      ->needs(golden);
  cmd->callback([args, max_abs] {
    if (max_abs->count() > 0 && args->numerics.numerics != "f32")
      Fail<UsageError>(
          "--max-abs applies to --numerics f32 only (official numerics must give the engine's "
          "logits exactly and the reference's within --min-cosine)");
    const ordered_json j = Run(*args);
    if (args->output.machine()) {
      args->output.Emit(j, {"kernels.tensors", "decode.tensors", "cq_round_trip.tensors",
                            "golden.reference", "golden.official"});
    } else {
      PrintHuman(j);
    }
    if (!j["pass"].get<bool>()) SetExitCode(1);
  });
}

}  // namespace needle::cli
