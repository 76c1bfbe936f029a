// Reusable option groups shared by subcommands, so every subcommand spells a flag the same way.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

namespace needle::cli {

// The MODEL.cact positional argument (required), spelled the same in every subcommand.
CLI::Option* AddModelPositional(CLI::App* cmd, std::string* path);

// MODEL.cact positional argument (required) plus --no-mmap.
struct ModelArgs {
  std::string path;
  bool no_mmap = false;
  void Attach(CLI::App* cmd);
};

// --json: print one JSON document on stdout instead of human tables.
struct OutputArgs {
  bool json = false;
  void Attach(CLI::App* cmd);
};

// -t/--threads N (0 = all cores).
struct ThreadArgs {
  int threads = 0;
  void Attach(CLI::App* cmd);
  int Resolve() const;  // the effective thread count (>= 1)
};

// --numerics official|f32: which arithmetic the forward pass uses (model/numerics.h).
struct NumericsArgs {
  std::string numerics = "official";
  void Attach(CLI::App* cmd);
};

// CLI11 splits an argument written in brackets ("[a,b]") into items when it goes to a list option
// or positional; a query or tool result that is a JSON array must arrive as written. Call
// KeepBracketedArguments(cmd) after a subcommand's options are added; main() parses the
// arguments returned by ProtectBracketedArguments, which marks every bracketed argument after
// such a subcommand's name so that CLI11 takes it as one item (the mark is removed before the
// value is stored).
void KeepBracketedArguments(CLI::App* cmd);
std::vector<std::string> ProtectBracketedArguments(const CLI::App& app, int argc,
                                                   const char* const* argv);
// A text input read to EOF: a file, a pipe such as `--tools <(cat t.json)`, or '-' = stdin.
// Throws IoError naming the file.
std::string ReadTextInput(const std::string& path);

}  // namespace needle::cli
