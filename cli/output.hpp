// Results go to stdout through these functions only, in the format chosen by --format:
// `table` (human text), `json` (pretty, 2-space indent) or `yaml`. Field names in json and yaml
// are stable snake_case and documented in README.md.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/context.hpp"
#include "util/expected.hpp"

namespace tpuctl::cli {

using Json = nlohmann::ordered_json;
using TableRenderer = std::function<void(std::ostream&, const Json&)>;

// A --format value, parsed: what Context takes from it.
struct FormatSpec {
  Format format = Format::table;
  std::vector<std::string> value_fields; // value(...), table(...), csv(...)
  bool value_table = false;
  bool value_csv = false;
  bool value_heading = true;
  bool json_lines = false; // jsonl
  bool none = false;       // gcloud's none: run, print nothing
  // The one command that takes this format ("tpuctl env" for dotenv, "tpuctl queued-resources
  // list" for jsonl), empty when every command does.
  std::string only_for;
};

// Parses a --format value (also `tpuctl config set format`): table, json, yaml, none, default,
// value(F,...), table(F,...), csv[no-heading](F,...), and the one-command forms dotenv and jsonl.
// Errors: usage naming the value and every form.
Expected<FormatSpec> parse_format(const std::string& text);

// Writes `data` (one object: a describe, a create's result) to stdout. For the table format,
// `table` renders it (default: a two-column key/value listing of an object, or one line per
// scalar). Errors: usage when --format value(...)/table(...)/csv(...) names a field the object
// does not have, as emit_list does for lists (nothing is printed then).
[[nodiscard]] Status emit(const Context& ctx, const Json& data, const TableRenderer& table = {});

struct Column {
  std::string header; // shown upper-case in the table
  std::string field;  // key in each row object
};

// Emits a list: json/yaml as an array of objects, table as aligned columns, value(...),
// table(...) and csv(...) as the named fields; only the rows that pass --filter (and, for rows
// with a `project` field, as `example` shows, those of --project when given), in --sort-by
// order, at most --limit. A column's header (lower case) names its field too. Errors: usage when
// --filter, --sort-by or a projection names a field neither the rows, the columns nor `example`
// (a row of the kind with every field, so an empty list knows them too) have; nothing is printed.
[[nodiscard]] Status emit_list(const Context& ctx, const Json& rows,
                               const std::vector<Column>& columns, const Json& example = Json());

// How a table is drawn on a terminal (the defaults draw plain text at any width).
struct TableStyle {
  int max_width = 0;               // > 0: cut the last column so lines fit (never below 8)
  bool colour = false;             // bold headers, coloured state words
  std::vector<bool> state_columns; // which columns hold states (cli/terminal.hpp state_colour)
};

// Aligned columns with two spaces between them and a header row.
std::string render_table(const std::vector<std::string>& headers,
                         const std::vector<std::vector<std::string>>& rows,
                         const TableStyle& style = {});

// Block-style YAML for any JSON value (arrays of scalars in flow style).
std::string to_yaml(const Json& value);

// A scalar as text for a table cell: strings unquoted, booleans true/false, null empty.
std::string cell_text(const Json& value);

// An `error` field as every command prints it: null when `message` is empty, else
// {code, message} (`code` a stable word such as an outcome or a state, null when none).
Json error_json(const std::string& code, const std::string& message);

// A point in time as every command prints it: RFC 3339 text in UTC with milliseconds
// ("2026-11-22T10:00:00.123Z"), null when `unix_ms` is 0 (never happened). Never fails.
Json time_json(int64_t unix_ms);

// A --watch loop's next wait for a change (`qr list --watch`, `events --watch`): 30 s, or what
// is left of its --timeout (`timeout`, from `start`; 0: none); nullopt once that has passed.
std::optional<std::chrono::milliseconds>
next_watch_wait(std::chrono::steady_clock::time_point start, std::chrono::milliseconds timeout);

} // namespace tpuctl::cli
