// Subcommand registry: each cmd_*.cpp defines one Register* function that adds its subcommand
// (options + callback) to the app. Callbacks run inside app.parse() and may throw needle::Error.
#pragma once

#include <CLI/CLI.hpp>

namespace needle::cli {

void RegisterAll(CLI::App& app);

// Exit code set by a subcommand that succeeded in running but found a failure (e.g. verify).
int ExitCode();
void SetExitCode(int code);

void RegisterInspect(CLI::App& app);
void RegisterDequant(CLI::App& app);
void RegisterRequant(CLI::App& app);
void RegisterSynth(CLI::App& app);
void RegisterTokenize(CLI::App& app);
void RegisterDetokenize(CLI::App& app);
void RegisterVerify(CLI::App& app);
void RegisterBench(CLI::App& app);
void RegisterRun(CLI::App& app);
void RegisterEval(CLI::App& app);

}  // namespace needle::cli
