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

// The Markdown forms' first lines: the system, then the table's header and alignment rows
// (`left` columns left-aligned, then the rest right-aligned).
std::string MdTableStart(const SystemInfo& s, const std::vector<std::string>& columns, size_t left);
// One record in the json form (`index` > 0: after a comma) or the jsonl form (a line with the
// system inside).
std::string JsonRecordText(nlohmann::ordered_json record, const SystemInfo& s, bool jsonl,
                           size_t index);

}  // namespace needle::report
