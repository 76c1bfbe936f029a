// Text helpers the report renderers share (bench and session records): Markdown cells and rows,
// CSV fields, SQL literals, finite numbers, the system object and compact JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "report/system.h"

namespace needle::report {

// A Markdown table row; cells have pipes escaped and line breaks as spaces.
std::string MdRow(const std::vector<std::string>& cells);
// A CSV field: quoted, inner quotes doubled.
std::string CsvField(const std::string& s);
// An SQL string literal: single-quoted, inner quotes doubled.
std::string SqlText(const std::string& s);
// A finite number as text, or `missing` for NaN and infinities (NULL in SQL, empty in CSV).
std::string Number(double v, const char* missing);
// The records' "system" object.
nlohmann::ordered_json SystemJson(const SystemInfo& s);
// Compact JSON; invalid UTF-8 in strings is replaced, never thrown on.
std::string Dump(const nlohmann::ordered_json& j);

}  // namespace needle::report
