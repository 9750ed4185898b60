#include "cli/output.hpp"

#include <algorithm>
#include <iostream>
#include <regex>
#include <sstream>
#include <unistd.h>

#include "cli/list_filter.hpp"
#include "cli/terminal.hpp"
#include "util/strings.hpp"
#include "util/time_text.hpp"

namespace tpuctl::cli {

Expected<FormatSpec> parse_format(const std::string& f) {
  FormatSpec spec;
  const auto refuse = [&] {
    return usage_error("--format: '" + f +
                       "' is not an output format (use table, json, yaml, value(FIELD,...), "
                       "table(FIELD,...), csv(FIELD,...) or none; dotenv for tpuctl env, jsonl for "
                       "qr list --watch)");
  };
  if (f == "table" || f == "default") {
    spec.format = Format::table;
  } else if (f == "json") {
    spec.format = Format::json;
  } else if (f == "yaml") {
    spec.format = Format::yaml;
  } else if (f == "none") {
    spec.format = Format::json;
    spec.none = true;
  } else if (f == "dotenv") {
    spec.format = Format::table; // `tpuctl env` only: its table form is the dotenv text
    spec.only_for = "tpuctl env";
  } else if (f == "jsonl") {
    spec.format = Format::json; // `qr list --watch` only: one JSON object per line
    spec.json_lines = true;
    spec.only_for = "tpuctl queued-resources list";
  } else if (util::starts_with(f, "value") || util::starts_with(f, "table") ||
             util::starts_with(f, "csv")) {
    TPUCTL_TRY_ASSIGN(auto fields, parse_value_format(f));
    if (fields.empty()) {
      return refuse();
    }
    spec.format = Format::value;
    spec.value_fields = std::move(fields);
    spec.value_table = util::starts_with(f, "table");
    spec.value_csv = util::starts_with(f, "csv");
    spec.value_heading = f.find("no-heading") == std::string::npos;
  } else {
    return refuse();
  }
  return spec;
}

Json error_json(const std::string& code, const std::string& message) {
  if (message.empty()) {
    return Json();
  }
  return Json{{"code", code.empty() ? Json() : Json(code)}, {"message", message}};
}

Json time_json(int64_t unix_ms) {
  return unix_ms > 0 ? Json(util::format_timestamp_ms(unix_ms)) : Json();
}

std::string cell_text(const Json& value) {
  if (value.is_string()) {
    return value.get<std::string>();
  }
  if (value.is_null()) {
    return "";
  }
  if (value.is_array()) {
    bool scalars =
        std::all_of(value.begin(), value.end(), [](const Json& v) { return !v.is_structured(); });
    if (scalars) {
      std::string out;
      for (size_t i = 0; i < value.size(); ++i) {
        out += (i ? "," : "") + cell_text(value[i]);
      }
      return out;
    }
  }
  return value.dump();
}

static void default_table(std::ostream& os, const Json& data) {
  if (data.is_object()) {
    size_t width = 0;
    for (auto it = data.begin(); it != data.end(); ++it) {
      width = std::max(width, it.key().size());
    }
    for (auto it = data.begin(); it != data.end(); ++it) {
      os << it.key() << ":" << std::string(width - it.key().size() + 1, ' ')
         << cell_text(it.value()) << "\n";
    }
  } else if (data.is_array()) {
    for (const auto& v : data) {
      os << cell_text(v) << "\n";
    }
  } else {
    os << cell_text(data) << "\n";
  }
}

// --format value(a,b): the fields tab-separated, a row a line; table(a,b): under a header.
static void print_value_rows(const Context& ctx, const Json& rows) {
  std::ostream& os = ctx.stdout_stream();
  if (ctx.value_table) {
    std::vector<std::string> headers;
    for (const auto& f : ctx.value_fields) {
      // gcloud's header: the last name of the path, ACCELERATOR_TYPE for acceleratorType.
      const auto start = f.find_last_of(".]");
      std::string h;
      for (char c : f.substr(start == std::string::npos ? 0 : start + 1)) {
        if (std::isupper(static_cast<unsigned char>(c)) && !h.empty()) {
          h += '_';
        }
        h += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      }
      headers.push_back(h);
    }
    std::vector<std::vector<std::string>> cells;
    for (const auto& row : rows) {
      std::vector<std::string> r;
      for (const auto& f : ctx.value_fields) {
        r.push_back(cell_text(field_of(row, f)));
      }
      cells.push_back(std::move(r));
    }
    os << render_table(headers, cells);
  } else if (ctx.value_csv) {
    auto quoted = [](const std::string& v) {
      if (v.find_first_of(",\"\n") == std::string::npos) {
        return v;
      }
      std::string out = "\"";
      for (char c : v) {
        out += c == '"' ? std::string("\"\"") : std::string(1, c);
      }
      return out + "\"";
    };
    if (ctx.value_heading) {
      for (size_t i = 0; i < ctx.value_fields.size(); ++i) {
        os << (i ? "," : "") << quoted(ctx.value_fields[i]);
      }
      os << "\n";
    }
    for (const auto& row : rows) {
      for (size_t i = 0; i < ctx.value_fields.size(); ++i) {
        os << (i ? "," : "") << quoted(cell_text(field_of(row, ctx.value_fields[i])));
      }
      os << "\n";
    }
  } else {
    for (const auto& row : rows) {
      for (size_t i = 0; i < ctx.value_fields.size(); ++i) {
        os << (i ? "\t" : "") << cell_text(field_of(row, ctx.value_fields[i]));
      }
      os << "\n";
    }
  }
  os.flush();
}

namespace {
Status check_fields(const std::vector<std::string>& wanted, const std::vector<std::string>& known,
                    const std::string& flag);
std::string value_flag(const Context& ctx);
} // namespace

Status emit(const Context& ctx, const Json& data, const TableRenderer& table) {
  std::ostream& os = ctx.stdout_stream();
  if (ctx.format == Format::value && data.is_object()) {
    std::vector<std::string> known;
    for (auto it = data.begin(); it != data.end(); ++it) {
      known.push_back(it.key());
    }
    TPUCTL_TRY(check_fields(ctx.value_fields, known, value_flag(ctx)));
  }
  switch (ctx.format) {
  case Format::json:
    os << data.dump(2) << "\n";
    break;
  case Format::yaml:
    os << to_yaml(data);
    break;
  case Format::value:
    if (data.is_object()) {
      print_value_rows(ctx, Json::array({data}));
    } else {
      default_table(os, data);
    }
    break;
  case Format::table:
    if (table) {
      table(os, data);
    } else {
      default_table(os, data);
    }
    break;
  }
  os.flush();
  return tpuctl::ok();
}

std::string render_table(const std::vector<std::string>& headers,
                         const std::vector<std::vector<std::string>>& rows_in,
                         const TableStyle& style) {
  std::vector<std::vector<std::string>> rows = rows_in;
  std::vector<size_t> width(headers.size());
  auto measure = [&] {
    for (size_t c = 0; c < headers.size(); ++c) {
      width[c] = headers[c].size();
      for (const auto& r : rows) {
        if (c < r.size()) {
          width[c] = std::max(width[c], r[c].size());
        }
      }
    }
  };
  measure();
  // Cut columns to the terminal's width: the last first, then the ones before it, right to left,
  // each to no less than 8 characters (or its header), and never the first (the names).
  if (style.max_width > 0 && !headers.empty()) {
    auto total = [&]() {
      size_t t = 0;
      for (size_t c = 0; c < headers.size(); ++c) {
        t += width[c] + (c + 1 < headers.size() ? 2 : 0);
      }
      return t;
    };
    const size_t max = static_cast<size_t>(style.max_width);
    for (size_t c = headers.size() - 1; c >= 1 && total() > max; --c) {
      const size_t floor = std::max<size_t>(8, headers[c].size());
      const size_t over = total() - max;
      if (width[c] <= floor) {
        continue;
      }
      const size_t to = width[c] - std::min(over, width[c] - floor);
      for (auto& r : rows) {
        if (c < r.size() && r[c].size() > to) {
          r[c] = r[c].substr(0, to - 3) + "...";
        }
      }
      measure();
    }
  }
  std::ostringstream os;
  auto line = [&](const std::vector<std::string>& cells, bool header) {
    std::string text;
    for (size_t c = 0; c < headers.size(); ++c) {
      std::string cell = c < cells.size() ? cells[c] : "";
      const size_t pad = width[c] - cell.size() + 2;
      if (header) {
        cell = paint(cell, Colour::bold, style.colour);
      } else if (c < style.state_columns.size() && style.state_columns[c]) {
        cell = paint(cell, state_colour(cell), style.colour);
      }
      text += cell;
      if (c + 1 < headers.size()) {
        text += std::string(pad, ' ');
      }
    }
    while (!text.empty() && text.back() == ' ') {
      text.pop_back();
    }
    os << text << "\n";
  };
  line(headers, true);
  for (const auto& r : rows) {
    line(r, false);
  }
  return os.str();
}

namespace {

// The top-level field names a list offers: its columns' and every row's keys.
std::vector<std::string> known_fields(const Json& rows, const std::vector<Column>& columns,
                                      const Json& example) {
  std::vector<std::string> out;
  auto add = [&](const std::string& f) {
    if (std::find(out.begin(), out.end(), f) == out.end()) {
      out.push_back(f);
    }
  };
  for (const auto& c : columns) {
    add(c.field);
  }
  auto add_keys = [&](const Json& row) {
    if (row.is_object()) {
      for (auto it = row.begin(); it != row.end(); ++it) {
        add(it.key());
      }
    }
  };
  for (const auto& row : rows) {
    add_keys(row);
  }
  add_keys(example);
  return out;
}

Status check_fields(const std::vector<std::string>& wanted, const std::vector<std::string>& known,
                    const std::string& flag) {
  auto has = [&](const std::string& k) {
    return std::find(known.begin(), known.end(), k.substr(0, k.find_first_of(".["))) != known.end();
  };
  for (const auto& key : wanted) {
    const auto alternates = gcloud_alternates(key);
    if (!has(key) && std::none_of(alternates.begin(), alternates.end(), has)) {
      return usage_error(flag + ": this output has no field '" + key +
                         "' (fields: " + util::join(known, ", ") + ")");
    }
  }
  return tpuctl::ok();
}

std::string value_flag(const Context& ctx) {
  return ctx.value_table ? "--format table(...)"
         : ctx.value_csv ? "--format csv(...)"
                         : "--format value(...)";
}

} // namespace

Status emit_list(const Context& ctx, const Json& rows, const std::vector<Column>& columns,
                 const Json& example) {
  // A column's header names its field too (--filter 'accelerator_type=v4-8' on a column shown
  // as ACCELERATOR_TYPE whose field is `type`): filters, sorting and value(...) see each row
  // with those names added; json and yaml print the row as it is.
  std::vector<std::pair<std::string, std::string>> aliases; // header (lower case), field
  for (const auto& c : columns) {
    const std::string h = util::to_lower(c.header);
    if (h != c.field && h.find_first_of(" .[") == std::string::npos) {
      aliases.emplace_back(h, c.field);
    }
  }
  std::vector<std::pair<Json, const Json*>> items; // (view, row)
  for (const auto& row : rows) {
    Json view = row;
    for (const auto& [h, f] : aliases) {
      if (view.is_object() && !view.contains(h)) {
        view[h] = field_of(row, f);
      }
    }
    items.emplace_back(std::move(view), &row);
  }
  std::vector<std::string> known = known_fields(rows, columns, example);
  for (const auto& [h, f] : aliases) {
    if (std::find(known.begin(), known.end(), h) == known.end()) {
      known.push_back(h);
    }
  }
  TPUCTL_TRY_ASSIGN(RowFilter filter, RowFilter::parse(ctx.globals.filter));
  TPUCTL_TRY(check_fields(filter.keys(), known, "--filter"));
  // gcloud's --project on a list: that project's rows only (rows with a project field).
  const bool by_project =
      !ctx.globals.project.empty() && example.is_object() && example.contains("project");
  items.erase(std::remove_if(items.begin(), items.end(),
                             [&](const auto& item) {
                               return !filter.matches(item.first) ||
                                      (by_project &&
                                       field_of(item.first, "project") != ctx.globals.project);
                             }),
              items.end());
  if (!ctx.globals.sort_by.empty()) {
    std::vector<std::pair<std::string, bool>> keys; // field, descending
    for (const auto& k : util::split(ctx.globals.sort_by, ',')) {
      const std::string key(util::trim(k));
      if (!key.empty()) {
        keys.emplace_back(key[0] == '~' ? key.substr(1) : key, key[0] == '~');
      }
    }
    std::vector<std::string> names;
    for (const auto& k : keys) {
      names.push_back(k.first);
    }
    TPUCTL_TRY(check_fields(names, known, "--sort-by"));
    std::stable_sort(items.begin(), items.end(), [&](const auto& a, const auto& b) {
      for (const auto& [field, desc] : keys) {
        const Json x = field_of(a.first, field), y = field_of(b.first, field);
        if (x == y) {
          continue;
        }
        return desc ? y < x : x < y;
      }
      return false;
    });
  }
  if (ctx.row_limit > 0 && items.size() > ctx.row_limit) {
    items.erase(items.begin() + static_cast<std::ptrdiff_t>(ctx.row_limit), items.end());
  }
  if (ctx.format == Format::value) {
    TPUCTL_TRY(check_fields(ctx.value_fields, known, value_flag(ctx)));
    Json views = Json::array();
    for (auto& item : items) {
      views.push_back(std::move(item.first));
    }
    print_value_rows(ctx, views);
    return tpuctl::ok();
  }
  Json kept = Json::array();
  for (const auto& item : items) {
    kept.push_back(*item.second);
  }
  return emit(ctx, kept, [&](std::ostream& os, const Json& data) {
    std::vector<std::string> headers;
    for (const auto& c : columns) {
      std::string h = c.header;
      std::transform(h.begin(), h.end(), h.begin(), ::toupper);
      headers.push_back(h);
    }
    std::vector<std::vector<std::string>> cells;
    for (const auto& row : data) {
      std::vector<std::string> r;
      for (const auto& c : columns) {
        r.push_back(cell_text(field_of(row, c.field)));
      }
      cells.push_back(std::move(r));
    }
    TableStyle style;
    style.max_width = terminal_columns();
    style.colour = colour_enabled(STDOUT_FILENO) && &ctx.stdout_stream() == &std::cout;
    for (const auto& c : columns) {
      style.state_columns.push_back(c.field == "state" || c.field == "status");
    }
    os << render_table(headers, cells, style);
  });
}

// ---- YAML ----------------------------------------------------------------------------------

static bool needs_quotes(const std::string& s) {
  if (s.empty()) {
    return true;
  }
  static const std::vector<std::string> k_reserved = {
      "true", "false", "null", "yes", "no",   "on",    "off", "~", "True", "False",
      "NULL", "Null",  "Yes",  "No",  "TRUE", "FALSE", "Y",   "N", "y",    "n"};
  if (std::find(k_reserved.begin(), k_reserved.end(), s) != k_reserved.end()) {
    return true;
  }
  if (s.front() == ' ' || s.back() == ' ') {
    return true;
  }
  if (std::string("-?:,[]{}#&*!|>'\"%@`").find(s.front()) != std::string::npos) {
    return true;
  }
  if (s.find(": ") != std::string::npos || s.find(" #") != std::string::npos || s.back() == ':') {
    return true;
  }
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) {
      return true;
    }
  }
  // Anything a YAML 1.1 or 1.2 reader could take for a number (or a sexagesimal like 1:20).
  static const std::regex k_number(
      R"([-+]?(\.[0-9]+|[0-9][0-9_]*(\.[0-9_]*)?)([eE][-+]?[0-9]+)?|0x[0-9a-fA-F_]+|0o?[0-7_]+|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN))");
  return s.find(':') != std::string::npos || std::regex_match(s, k_number);
}

static std::string yaml_scalar(const Json& v) {
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    return needs_quotes(s) ? Json(s).dump() : s;
  }
  if (v.is_null()) {
    return "null";
  }
  return v.dump();
}

static bool all_scalars(const Json& v) {
  return std::all_of(v.begin(), v.end(), [](const Json& e) { return !e.is_structured(); });
}

static std::string flow(const Json& v) {
  if (!v.is_array()) {
    return yaml_scalar(v);
  }
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    out += (i ? ", " : "") + flow(v[i]);
  }
  return out + "]";
}

// Arrays nested only of arrays and scalars (a device grid) print on one line.
static bool is_flow_array(const Json& v) {
  if (!v.is_array()) {
    return !v.is_object();
  }
  return std::all_of(v.begin(), v.end(), [](const Json& e) { return is_flow_array(e); });
}

static void yaml_node(std::ostream& os, const Json& v, int indent);

static void yaml_object(std::ostream& os, const Json& v, int indent) {
  std::string pad(static_cast<size_t>(indent), ' ');
  for (auto it = v.begin(); it != v.end(); ++it) {
    os << pad << it.key() << ":";
    const Json& child = it.value();
    if (child.is_object() && !child.empty()) {
      os << "\n";
      yaml_object(os, child, indent + 2);
    } else if (child.is_array() && !child.empty() && !is_flow_array(child)) {
      os << "\n";
      yaml_node(os, child, indent);
    } else if (child.is_object()) {
      os << " {}\n";
    } else {
      os << " " << flow(child) << "\n";
    }
  }
}

static void yaml_node(std::ostream& os, const Json& v, int indent) {
  std::string pad(static_cast<size_t>(indent), ' ');
  if (v.is_object()) {
    if (v.empty()) {
      os << pad << "{}\n";
    } else {
      yaml_object(os, v, indent);
    }
    return;
  }
  if (v.is_array()) {
    if (v.empty() || (all_scalars(v) && indent > 0) || is_flow_array(v)) {
      os << pad << flow(v) << "\n";
      return;
    }
    for (const auto& e : v) {
      if (e.is_object() && !e.empty()) {
        std::ostringstream inner;
        yaml_object(inner, e, indent + 2);
        std::string text = inner.str();
        // Replace the first line's indentation with "- ".
        os << pad << "- " << text.substr(static_cast<size_t>(indent) + 2);
      } else if (e.is_array() && !e.empty() && !is_flow_array(e)) {
        os << pad << "-\n";
        yaml_node(os, e, indent + 2);
      } else {
        os << pad << "- " << (e.is_object() ? std::string("{}") : flow(e)) << "\n";
      }
    }
    return;
  }
  os << pad << yaml_scalar(v) << "\n";
}

std::string to_yaml(const Json& value) {
  std::ostringstream os;
  yaml_node(os, value, 0);
  return os.str();
}

std::optional<std::chrono::milliseconds>
next_watch_wait(std::chrono::steady_clock::time_point start, std::chrono::milliseconds timeout) {
  std::chrono::milliseconds wait = std::chrono::seconds(30);
  if (timeout.count() > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        start + timeout - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return std::nullopt;
    }
    wait = std::min(wait, left);
  }
  return wait;
}

} // namespace tpuctl::cli
