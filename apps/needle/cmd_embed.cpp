// needle embed: contrastive-head embeddings of texts and tools, as tool retrieval computes them;
// with --confidence, the confidence head's logit on each query's rendered first turn.
#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "commands.h"
#include "format/cact.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "model/decoder.h"
#include "options.h"
#include "session/embedder.h"
#include "session/session.h"
#include "text/json_text.h"
#include "text/prompt.h"
#include "text/tokenizer.h"

namespace needle::cli {

namespace {

struct EmbedArgs {
  ModelArgs model;
  std::vector<std::string> texts;
  std::string tools_path, isa, system;
  bool confidence = false;
  ThreadArgs threads;
  NumericsArgs numerics;
  OutputArgs output;
};

format::CactFile OpenModel(const EmbedArgs& a) {
  return format::CactFile::Open(
      a.model.path, a.model.no_mmap ? format::LoadMode::kRead : format::LoadMode::kMmap);
}

// Threads, numeric path and ISA of the heads' decoder.
session::EmbedderConfig ConfigOf(const EmbedArgs& a) {
  session::EmbedderConfig cfg;
  cfg.threads = a.threads.Resolve();
  cfg.numerics = model::ParseNumericPath(a.numerics.numerics);
  cfg.kernels = a.isa.empty() ? nullptr : &kernels::KernelsFor(a.isa);
  return cfg;
}

std::string ToolsLabel(const EmbedArgs& a) {
  return a.tools_path == "-" ? std::string("<stdin>") : a.tools_path;
}

// --confidence: for each query, the prompt `needle run` renders (tools prefix pinned as sinks,
// then the user turn) pooled into the confidence head, before any token is generated.
void Confidence(const EmbedArgs& a) {
  if (a.texts.empty()) Fail<UsageError>("--confidence needs QUERY texts to score");
  const std::string tools_json = a.tools_path.empty() ? std::string() : ReadTextInput(a.tools_path);
  const std::string label = ToolsLabel(a);
  const std::string tools_text = text::RenderToolsText(tools_json, label + ": tools");
  const format::CactFile file = OpenModel(a);
  const auto model = std::make_shared<const model::Model>(file);
  const auto tokenizer = text::Tokenizer::FromCact(file);
  const text::PromptRenderer renderer(tokenizer);
  const session::EmbedderConfig cfg = ConfigOf(a);
  session::ConfidenceScorer scorer(model, cfg);
  // More tools than the prompt shows: each query renders the ones retrieval picks, as in run.
  std::unique_ptr<session::Session> retrieval;
  if (!tools_text.empty() &&
      text::ToolInventory(tools_text, label + ": tools").size() > text::kMaxRenderedTools) {
    session::SessionConfig sc;
    sc.threads = cfg.threads;
    sc.numerics = cfg.numerics;
    sc.kernels = cfg.kernels;
    retrieval = std::make_unique<session::Session>(file, model, sc, a.system, tools_json);
  }
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (size_t i = 0; i < a.texts.size(); ++i) {
    const std::string& q = a.texts[i];
    const std::string shown_tools = retrieval ? retrieval->ToolsTextFor(q) : tools_text;
    // Fed as run feeds it: the tools prefix, then the turn; with retrieval the rebuilt context:
    // the BOS as one call, then the rest (the engine's rebuild).
    std::vector<int32_t> ids = renderer.PrefixIds(a.system, shown_tools);
    const auto sinks = static_cast<uint32_t>(ids.size());
    std::vector<int32_t> turn = renderer.FirstTurnIds(q);
    if (retrieval) {
      turn.insert(turn.begin(), ids.begin() + 1, ids.end());
      ids.resize(1);
    }
    const float logit = scorer.Logit(ids, turn, sinks);
    const size_t tokens = ids.size() + turn.size();
    const double p = kernels::Sigmoid(logit);
    if (a.output.machine()) {
      list.push_back({{"text", q}, {"tokens", tokens}, {"logit", logit}, {"probability", p}});
    } else {
      fmt::print("text {}: {}\n  confidence logit {:.6f} (probability {:.4f}, {} tokens)\n", i, q,
                 logit, p, tokens);
    }
  }
  if (a.output.machine()) {
    nlohmann::ordered_json j;
    j["model"] = a.model.path;
    j["numerics"] = a.numerics.numerics;
    j["confidence"] = std::move(list);
    a.output.Emit(j, {"confidence"});
  }
}

void Embed(const EmbedArgs& a) {
  if (a.confidence) return Confidence(a);
  if (!a.system.empty()) Fail<UsageError>("--system applies to --confidence only");
  if (a.texts.empty() && a.tools_path.empty())
    Fail<UsageError>("nothing to embed: give TEXT arguments or --tools FILE");
  std::vector<std::string> tools;
  if (!a.tools_path.empty()) {
    const std::string label = ToolsLabel(a);
    const std::string tools_text =
        text::RenderToolsText(ReadTextInput(a.tools_path), label + ": tools");
    tools = text::ToolInventory(tools_text, label + ": tools");
  }
  const format::CactFile file = OpenModel(a);
  const auto tokenizer = text::Tokenizer::FromCact(file);
  const text::PromptRenderer renderer(tokenizer);
  const session::EmbedderConfig cfg = ConfigOf(a);
  session::ContrastiveEmbedder embedder(std::make_shared<const model::Model>(file), tokenizer,
                                        renderer.tokens().bos, cfg);
  if (a.output.machine()) {
    nlohmann::ordered_json j;
    j["model"] = a.model.path;
    j["numerics"] = a.numerics.numerics;
    j["dim"] = embedder.dim();
    auto items = [&](const std::vector<std::string>& inputs, const char* key) {
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      for (const std::string& input : inputs)
        list.push_back({{key, input}, {"embedding", embedder.Embed(input)}});
      return list;
    };
    j["tools"] = items(tools, "tool");
    j["texts"] = items(a.texts, "text");
    a.output.Emit(j, {"tools", "texts"});
    return;
  }
  auto print = [&](const char* kind, size_t index, const std::string& input) {
    const std::vector<float> e = embedder.Embed(input);
    fmt::print("{} {}: {}\n  {:.6f}\n", kind, index, input, fmt::join(e, " "));
  };
  for (size_t i = 0; i < tools.size(); ++i) print("tool", i, tools[i]);
  for (size_t i = 0; i < a.texts.size(); ++i) print("text", i, a.texts[i]);
}

}  // namespace

void RegisterEmbed(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "embed",
      "Print the contrastive-head embedding of texts and tools (as tool retrieval uses them)");
  auto a = std::make_shared<EmbedArgs>();
  a->model.Attach(cmd);
  cmd->add_option("text", a->texts, "Texts to embed (a query is embedded as written)");
  cmd->add_option("--tools", a->tools_path,
                  "Tools JSON file: embed each tool's minified JSON, as retrieval does; with "
                  "--confidence, the tools the prompt shows ('-' = stdin)");
  cmd->add_flag("--confidence", a->confidence,
                "Instead: the confidence head's logit (and sigmoid) on each TEXT rendered as a "
                "query's first turn (with --tools and --system), before any reply token");
  cmd->add_option("--system", a->system, "System prompt text (with --confidence)");
  a->threads.Attach(cmd);
  a->numerics.Attach(cmd);
  cmd->add_option("--isa", a->isa,
                  "Force a kernel ISA (scalar, avx2, avx512, neon, dotprod); default: fastest");
  a->output.Attach(cmd);
  KeepBracketedArguments(cmd);  // texts that are JSON arrays
  cmd->callback([a] { Embed(*a); });
}

}  // namespace needle::cli
