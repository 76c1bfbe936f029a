// needle: command-line entry point. Registers every subcommand, catches library errors once,
// prints one clear line on stderr and maps the error kind to the exit code.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "base/error.h"
#include "commands.h"
#include "options.h"

int main(int argc, char** argv) {
  CLI::App app{"needle: inspect, convert, verify, run and benchmark Needle 2 (.cact) models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("needle ") + NEEDLE_VERSION);
  needle::cli::RegisterAll(app);
  try {
    std::vector<std::string> args = needle::cli::ProtectBracketedArguments(app, argc, argv);
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message; its own codes (105, 106, ...) become the usage code 2.
    const int code = app.exit(e);
    return code == 0 ? 0 : static_cast<int>(needle::ErrorKind::kUsage);
  } catch (const needle::Error& e) {
    fmt::print(stderr, "needle: error: {}\n", e.what());
    return static_cast<int>(e.kind());
  } catch (const std::exception& e) {
    fmt::print(stderr, "needle: internal error: {}\n", e.what());
    return static_cast<int>(needle::ErrorKind::kInternal);
  }
  return needle::cli::ExitCode();
}
