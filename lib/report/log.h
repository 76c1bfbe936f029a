// Diagnostics through spdlog: one logger on stderr whose lines read "needle: <level>: <message>".
// User-facing output (results on stdout, the final error line, progress bars) does not go
// through it. Until InitLogging runs, spdlog's default logger is used as it is. Only log.cpp
// includes spdlog (its header-only build costs ~12 s of compile time per translation unit): the
// rest of the code logs through Log() below.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace needle::report {

// The names --log-level and NEEDLE_LOG_LEVEL accept, most verbose first:
// trace, debug, info, warning, error, off.
const std::vector<std::string>& LogLevelNames();

// Installs the stderr logger at `level` (one of LogLevelNames(); "warn" = "warning"). Throws
// UsageError naming `source` (the option or variable it came from) for any other value.
void InitLogging(std::string_view level, std::string_view source);

// The current level's name (one of LogLevelNames()).
std::string LogLevel();

// Lowers the threshold to `level` if it is above it (e.g. -v asks for debug lines). Throws
// UsageError naming `source` when the level is "error" or "off" (asked for quiet) or unknown.
void RaiseLogLevel(std::string_view level, std::string_view source);

// Whether messages at `level` are printed now (false for unknown names).
bool LogEnabled(std::string_view level);

enum class LogSeverity { kTrace, kDebug, kInfo, kWarning, kError };
bool LogEnabled(LogSeverity severity);
// Prints one line at `severity` (if enabled) through the installed logger.
void LogLine(LogSeverity severity, std::string_view message);

// Formats (fmt syntax) and prints one line, only when `severity` is enabled.
template <class... Args>
void Log(LogSeverity severity, fmt::format_string<Args...> format, Args&&... args) {
  if (LogEnabled(severity)) LogLine(severity, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace needle::report
