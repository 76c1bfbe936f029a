// Text helpers shared by the report renderers.
#include "report/render_text.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

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

namespace {
constexpr std::pair<const char*, const char*> kSystemColumns[] = {
    {"needle_version", "TEXT"},   {"git_commit", "TEXT"}, {"cpu", "TEXT"},
    {"logical_cores", "INTEGER"}, {"os", "TEXT"},         {"compiler", "TEXT"}};
}  // namespace

SqlColumns SqlSystemColumns() { return kSystemColumns; }

std::vector<std::string> SqlSystemValues(const SystemInfo& s) {
  return {SqlText(s.version),   SqlText(s.commit),
          SqlText(s.cpu_model), std::to_string(s.logical_cores),
          SqlText(s.os),        SqlText(s.compiler)};
}

std::string SqlCreateTable(const char* table, SqlColumns own) {
  std::string out = fmt::format("CREATE TABLE IF NOT EXISTS {} (\n", table);
  bool first = true;
  for (const SqlColumns columns : {SqlSystemColumns(), own})
    for (const auto& [name, type] : columns) {
      out += fmt::format("{}  {} {}", first ? "" : ",\n", name, type);
      first = false;
    }
  return out + "\n);\n";
}

std::string SqlInsert(const char* table, SqlColumns own, const SystemInfo& s,
                      const std::vector<std::string>& own_values) {
  std::vector<std::string> names, values = SqlSystemValues(s);
  for (const SqlColumns columns : {SqlSystemColumns(), own})
    for (const auto& column : columns) names.emplace_back(column.first);
  values.insert(values.end(), own_values.begin(), own_values.end());
  return fmt::format("INSERT INTO {} ({}) VALUES ({});\n", table, fmt::join(names, ", "),
                     fmt::join(values, ", "));
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

std::string MdMiB(uint64_t bytes) {
  return bytes ? fmt::format("{:.1f}", double(bytes) / (1024.0 * 1024.0)) : std::string("-");
}

std::string JsonBegin(const SystemInfo& s) {
  return fmt::format("{{\"system\": {},\n \"records\": [", Dump(SystemJson(s)));
}

std::string JsonEnd(size_t rows) { return rows ? "\n ]}\n" : "]}\n"; }

std::string JsonRecordText(nlohmann::ordered_json record, const SystemInfo& s, bool jsonl,
                           size_t index) {
  if (!jsonl) return fmt::format("{}\n  {}", index ? "," : "", Dump(record));
  record["system"] = SystemJson(s);
  return Dump(record) + "\n";
}

}  // namespace needle::report
