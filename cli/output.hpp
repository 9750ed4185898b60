// Results go to stdout through these functions only, in the format chosen by --format:
// `table` (human text), `json` (pretty, 2-space indent) or `yaml`. Field names in json and yaml
// are stable snake_case and documented in README.md.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/context.hpp"
#include "util/expected.hpp"

namespace tpuctl::cli {

using Json = nlohmann::ordered_json;
using TableRenderer = std::function<void(std::ostream&, const Json&)>;

// Writes `data` to stdout. For the table format, `table` renders it (default: a two-column
// key/value listing of an object, or one line per scalar).
void emit(const Context& ctx, const Json& data, const TableRenderer& table = {});

struct Column {
  std::string header; // shown upper-case in the table
  std::string field;  // key in each row object
};

// Emits a list: json/yaml as an array of objects, table as aligned columns, value(...) as the
// named fields tab-separated; only the rows that pass --filter. Errors: usage when --filter or
// value(...) names a field the rows do not have (nothing is printed then).
[[nodiscard]] Status emit_list(const Context& ctx, const Json& rows,
                               const std::vector<Column>& columns);

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

} // namespace tpuctl::cli
