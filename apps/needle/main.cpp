// needle: command-line entry point. Registers every subcommand and the global options (--version,
// --log-level, --quiet), catches library errors once, prints one clear line on stderr and maps
// the error kind to the exit code.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "base/error.h"
#include "commands.h"
#include "options.h"
#include "report/log.h"
#include "version.h"

int main(int argc, char** argv) {
  CLI::App app{"needle: inspect, convert, verify, run and benchmark Needle 2 (.cact) models"};
  app.require_subcommand(1);
  app.footer(
      "Exit codes: 0 success; 1 a check failed (verify, eval under --min-accuracy) or a run "
      "--batch line gave an error object; 2 usage; 3 I/O; 4 malformed file; 5 invalid values; "
      "70 internal error.");
  app.fallthrough();  // the global options below may follow the subcommand too
  app.set_version_flag(
      "--version", [] { return needle::cli::VersionText(); },
      "Print the version, git commit, compiler and kernel ISAs (compiled, usable here); exit");
  std::string log_level;
  bool quiet = false;
  auto* level_option =
      app.add_option("--log-level", log_level,
                     "Diagnostics on stderr: trace, debug, info (default), warning, error, off; "
                     "default from NEEDLE_LOG_LEVEL");
  app.add_flag("-q,--quiet", quiet, "Only errors on stderr (log level error, no progress bars)")
      ->excludes(level_option);
  // Before any subcommand's callback: the level is known when the work starts.
  app.parse_complete_callback([&] {
    const char* env = std::getenv("NEEDLE_LOG_LEVEL");
    if (quiet) {
      needle::report::InitLogging("error", "--quiet");
    } else if (!log_level.empty()) {
      needle::report::InitLogging(log_level, "--log-level");
    } else if (env != nullptr && *env != '\0') {
      needle::report::InitLogging(env, "NEEDLE_LOG_LEVEL");
    } else {
      needle::report::InitLogging("info", "the default log level");
    }
  });
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
