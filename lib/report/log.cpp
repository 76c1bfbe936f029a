// InitLogging: the stderr sink, the line pattern and the level names.
#include "report/log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <optional>

#include "base/error.h"

namespace needle::report {

namespace {

std::optional<spdlog::level::level_enum> ParseLevel(std::string_view name) {
  if (name == "trace") return spdlog::level::trace;
  if (name == "debug") return spdlog::level::debug;
  if (name == "info") return spdlog::level::info;
  if (name == "warning" || name == "warn") return spdlog::level::warn;
  if (name == "error") return spdlog::level::err;
  if (name == "off") return spdlog::level::off;
  return std::nullopt;
}

}  // namespace

const std::vector<std::string>& LogLevelNames() {
  static const std::vector<std::string> names = {"trace",   "debug", "info",
                                                 "warning", "error", "off"};
  return names;
}

void InitLogging(std::string_view level, std::string_view source) {
  const auto parsed = ParseLevel(level);
  if (!parsed)
    Fail<UsageError>("{}: unknown log level '{}' (trace, debug, info, warning, error, off)", source,
                     level);
  auto logger =
      std::make_shared<spdlog::logger>("needle", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_pattern("needle: %l: %v");
  logger->set_level(*parsed);
  logger->flush_on(spdlog::level::trace);  // every line at once (stdout may interleave)
  spdlog::set_default_logger(std::move(logger));
}

std::string LogLevel() {
  switch (spdlog::get_level()) {
    case spdlog::level::trace:
      return "trace";
    case spdlog::level::debug:
      return "debug";
    case spdlog::level::info:
      return "info";
    case spdlog::level::warn:
      return "warning";
    case spdlog::level::err:
    case spdlog::level::critical:
      return "error";
    default:
      return "off";
  }
}

void RaiseLogLevel(std::string_view level, std::string_view source) {
  const auto parsed = ParseLevel(level);
  if (!parsed) Fail<UsageError>("{}: unknown log level '{}'", source, level);
  if (spdlog::should_log(*parsed)) return;
  if (!spdlog::should_log(spdlog::level::warn))
    Fail<UsageError>(
        "{} prints {} lines, but the log level is {} (--quiet, --log-level or "
        "NEEDLE_LOG_LEVEL); drop one of them",
        source, level, LogLevel());
  spdlog::set_level(*parsed);
}

bool LogEnabled(std::string_view level) {
  const auto parsed = ParseLevel(level);
  return parsed && spdlog::should_log(*parsed);
}

namespace {

spdlog::level::level_enum SpdlogLevel(LogSeverity severity) {
  switch (severity) {
    case LogSeverity::kTrace:
      return spdlog::level::trace;
    case LogSeverity::kDebug:
      return spdlog::level::debug;
    case LogSeverity::kInfo:
      return spdlog::level::info;
    case LogSeverity::kWarning:
      return spdlog::level::warn;
    case LogSeverity::kError:
      break;
  }
  return spdlog::level::err;
}

}  // namespace

bool LogEnabled(LogSeverity severity) { return spdlog::should_log(SpdlogLevel(severity)); }

void LogLine(LogSeverity severity, std::string_view message) {
  spdlog::log(SpdlogLevel(severity), "{}", message);
}

}  // namespace needle::report
