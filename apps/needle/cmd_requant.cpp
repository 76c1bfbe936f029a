// needle requant: a dequant folder (possibly edited) -> .cact, keeping unchanged tensors' bytes.
#include <fmt/format.h>

#include "commands.h"
#include "convert/requant.h"
#include "options.h"

namespace needle::cli {

void RegisterRequant(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "requant", "Rebuild a .cact from a dequant folder; only edited tensors are re-quantized");
  struct Args {
    std::string in_dir, out, bits_map;
    convert::RequantOptions options;
    OutputArgs output;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("in_dir", args->in_dir, "Folder written by `needle dequant`")
      ->required()
      ->type_name("IN_DIR");
  cmd->add_option("out", args->out, "Output model (.cact)")->required()->type_name("OUT.cact");
  cmd->add_option("--bits-map", args->bits_map,
                  "CQ widths, e.g. embedding=4,mhc=4,default=2 (longest prefix wins); a CQ "
                  "tensor whose width changes is re-quantized");
  cmd->add_flag("--force", args->options.force, "Replace an existing output file");
  args->output.Attach(cmd);
  cmd->callback([args] {
    if (!args->bits_map.empty()) args->options.bits_map = convert::BitsMap::Parse(args->bits_map);
    const auto s = convert::Requant(args->in_dir, args->out, args->options);
    if (args->output.machine()) {
      nlohmann::ordered_json j;
      j["in_dir"] = args->in_dir;
      j["output"] = WrittenFileJson(args->out);
      j["tensors"] = s.kept + s.reencoded.size();
      j["kept"] = s.kept;
      j["reencoded"] = s.reencoded;
      args->output.Emit(j, {"reencoded"});
      return;
    }
    fmt::print("{}: {} tensors kept byte for byte, {} re-encoded{}{} ({} bytes)\n", args->out,
               s.kept, s.reencoded.size(), s.reencoded.empty() ? "" : ": ",
               fmt::join(s.reencoded, ", "), s.file_bytes);
  });
}

}  // namespace needle::cli
