// needle embed: contrastive-head embeddings of texts and tools, as tool retrieval computes them.
#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "commands.h"
#include "format/cact.h"
#include "kernels/dispatch.h"
#include "model/decoder.h"
#include "options.h"
#include "session/embedder.h"
#include "text/json_text.h"
#include "text/prompt.h"
#include "text/tokenizer.h"

namespace needle::cli {

namespace {

struct EmbedArgs {
  ModelArgs model;
  std::vector<std::string> texts;
  std::string tools_path, isa;
  ThreadArgs threads;
  NumericsArgs numerics;
  OutputArgs output;
};

void Embed(const EmbedArgs& a) {
  if (a.texts.empty() && a.tools_path.empty())
    Fail<UsageError>("nothing to embed: give TEXT arguments or --tools FILE");
  std::vector<std::string> tools;
  if (!a.tools_path.empty()) {
    const std::string label = (a.tools_path == "-" ? std::string("<stdin>") : a.tools_path);
    const std::string tools_text =
        text::RenderToolsText(ReadTextInput(a.tools_path), label + ": tools");
    tools = text::ToolInventory(tools_text, label + ": tools");
  }
  const format::CactFile file = format::CactFile::Open(
      a.model.path, a.model.no_mmap ? format::LoadMode::kRead : format::LoadMode::kMmapPrefault);
  const auto tokenizer = text::Tokenizer::FromCact(file);
  const text::PromptRenderer renderer(tokenizer);
  session::EmbedderConfig cfg;
  cfg.threads = a.threads.Resolve();
  cfg.numerics = model::ParseNumericPath(a.numerics.numerics);
  cfg.kernels = a.isa.empty() ? nullptr : &kernels::KernelsFor(a.isa);
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
                  "Tools JSON file: embed each tool's minified JSON, as retrieval does ('-' = "
                  "stdin)");
  a->threads.Attach(cmd);
  a->numerics.Attach(cmd);
  cmd->add_option("--isa", a->isa,
                  "Force a kernel ISA (scalar, avx2, avx512, neon, dotprod); default: fastest");
  a->output.Attach(cmd);
  KeepBracketedArguments(cmd);  // texts that are JSON arrays
  cmd->callback([a] { Embed(*a); });
}

}  // namespace needle::cli
