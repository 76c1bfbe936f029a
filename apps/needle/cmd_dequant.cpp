// needle dequant: .cact -> OUT_DIR/{weights.safetensors, config.json, source.cact}.
#include <fmt/format.h>

#include <filesystem>

#include "commands.h"
#include "convert/dequant.h"
#include "options.h"

namespace needle::cli {

void RegisterDequant(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "dequant", "Write a model as F32 safetensors + config.json + source.cact for training tools");
  struct Args {
    std::string model, out_dir;
    convert::DequantOptions options;
    OutputArgs output;
  };
  auto args = std::make_shared<Args>();
  AddModelPositional(cmd, &args->model);
  cmd->add_option("out_dir", args->out_dir, "Output folder (must not exist unless --force)")
      ->type_name("OUT_DIR")
      ->required();
  cmd->add_flag("--force", args->options.force, "Replace an existing output folder");
  args->output.Attach(cmd);
  cmd->callback([args] {
    const auto s = convert::Dequant(args->model, args->out_dir, args->options);
    if (args->output.machine()) {
      const std::filesystem::path dir(args->out_dir);
      nlohmann::ordered_json j;
      j["model"] = args->model;
      j["out_dir"] = args->out_dir;
      j["tensors"] = s.tensors;
      j["files"] = {
          {"weights", WrittenFileJson((dir / convert::kWeightsFile).string())},
          {"config", WrittenFileJson((dir / convert::kConfigFile).string())},
          {"source", WrittenFileJson((dir / convert::kSourceFile).string())},
      };
      args->output.Emit(j, {});
      return;
    }
    fmt::print("{}: {} tensors as F32 ({} bytes of safetensors), source SHA-256 {}\n",
               args->out_dir, s.tensors, s.safetensors_bytes, s.source_sha256);
  });
}

}  // namespace needle::cli
