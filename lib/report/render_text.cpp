// Text helpers shared by the report renderers.
#include "report/render_text.h"

#include <fmt/format.h>

#include <cmath>

namespace needle::report {

namespace {
std::string MdCell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n' || c == '\r') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}
}  // namespace

std::string MdRow(const std::vector<std::string>& cells) {
  std::string out = "|";
  for (const std::string& c : cells) {
    out += ' ';
    out += MdCell(c);
    out += " |";
  }
  return out + "\n";
}

std::string CsvField(const std::string& s) {
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string SqlText(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

std::string Number(double v, const char* missing) {
  return std::isfinite(v) ? fmt::format("{}", v) : std::string(missing);
}

nlohmann::ordered_json SystemJson(const SystemInfo& s) {
  nlohmann::ordered_json j = {{"cpu", s.cpu_model},
                              {"logical_cores", s.logical_cores},
                              {"os", s.os},
                              {"compiler", s.compiler},
                              {"needle_version", s.version}};
  if (!s.commit.empty()) j["commit"] = s.commit;
  if (!s.build_type.empty()) j["build_type"] = s.build_type;
  if (!s.isas.empty()) j["isas"] = s.isas;
  return j;
}

std::string Dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string MdTableStart(const SystemInfo& s, const std::vector<std::string>& columns,
                         size_t left) {
  std::string out = fmt::format("cpu: {} ({} logical cores), {}, {}, needle {}{}\n\n", s.cpu_model,
                                s.logical_cores, s.os, s.compiler, s.version,
                                s.commit.empty() ? "" : " (" + s.commit + ")");
  out += MdRow(columns);
  out += "|";
  for (size_t i = 0; i < columns.size(); ++i) out += i < left ? " --- |" : " ---: |";
  return out + "\n";
}

std::string JsonRecordText(nlohmann::ordered_json record, const SystemInfo& s, bool jsonl,
                           size_t index) {
  if (!jsonl) return fmt::format("{}\n  {}", index ? "," : "", Dump(record));
  record["system"] = SystemJson(s);
  return Dump(record) + "\n";
}

}  // namespace needle::report
