// Reusable option groups shared by subcommands, so every subcommand spells a flag the same way.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
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

// --json: one compact JSON document on stdout instead of human text; --jsonl: the same content as
// JSON lines, for scripts that stream: one line per element of the command's lists (each with
// "record": the list's name), then a last line {"record": "summary", ...the rest}.
struct OutputArgs {
  bool json = false;
  bool jsonl = false;
  void Attach(CLI::App* cmd);
  bool machine() const { return json || jsonl; }
  // Prints `doc` as --json or --jsonl asks. `lists` are the keys (dotted paths, e.g.
  // "golden.reference") whose array elements become the JSONL records.
  void Emit(const nlohmann::ordered_json& doc, std::initializer_list<const char*> lists) const;
};

// {"path", "bytes", "sha256"} of a file this command wrote (read back from the disk).
nlohmann::ordered_json WrittenFileJson(const std::string& path);
// Prints `j` on stdout as one compact line (the --json contract).
void PrintJsonLine(const nlohmann::ordered_json& j);

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

// --enforce-schema: also prune call values that cannot satisfy minimum / maximum / exclusive
// bounds, minLength, pattern and the regular formats (grammar::CompatOptions::
// enforce_value_limits; the engine does not).
struct SchemaArgs {
  bool enforce = false;
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

// The tools-prefix cache folder of run and eval: --prefix-cache DIR when given, else the
// environment's NEEDLE_PREFIX_CACHE (unset or empty: no cache).
std::string PrefixCacheDir(const std::string& option_value);

}  // namespace needle::cli
