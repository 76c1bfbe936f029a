// Text helpers the report renderers share (bench and session records): Markdown cells and rows,
// CSV fields, SQL literals, finite numbers, the system object and compact JSON.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <utility>
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

// SQL columns (name, type) in order; a table's columns are the system's, then its own.
using SqlColumns = std::span<const std::pair<const char*, const char*>>;
// The system's columns (needle_version, git_commit, cpu, logical_cores, os, compiler) and values.
SqlColumns SqlSystemColumns();
std::vector<std::string> SqlSystemValues(const SystemInfo& s);
// CREATE TABLE IF NOT EXISTS with the system's columns, then `own`.
std::string SqlCreateTable(const char* table, SqlColumns own);
// INSERT of the system's values, then `own_values` (one per column of `own`).
std::string SqlInsert(const char* table, SqlColumns own, const SystemInfo& s,
                      const std::vector<std::string>& own_values);

// The Markdown forms' first lines: the system, then the table's header and alignment rows
// (`left` columns left-aligned, then the rest right-aligned).
std::string MdTableStart(const SystemInfo& s, const std::vector<std::string>& columns, size_t left);
// A Markdown cell for a byte count in MiB with one decimal ("-" for 0: not measured).
std::string MdMiB(uint64_t bytes);
// The json form's opening text (the system, then the records array).
std::string JsonBegin(const SystemInfo& s);
// The json form's closing text after `rows` records.
std::string JsonEnd(size_t rows);
// One record in the json form (`index` > 0: after a comma) or the jsonl form (a line with the
// system inside).
std::string JsonRecordText(nlohmann::ordered_json record, const SystemInfo& s, bool jsonl,
                           size_t index);

}  // namespace needle::report
