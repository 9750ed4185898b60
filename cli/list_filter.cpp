#include "cli/list_filter.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <regex>

#include "util/strings.hpp"

namespace tpuctl::cli {

using Json = nlohmann::ordered_json;

struct RowFilter::Node {
  enum class Kind { term, all, any, negate } kind = Kind::term;
  std::string key, op, value;
  std::regex regex;
  std::vector<std::shared_ptr<const Node>> children;
};

namespace {

// libstdc++'s default regex matcher backtracks: "a*****************" (nested repeats) took
// exponential time on any row, so one --filter could hang tpuctl. __polynomial selects its
// Thompson-style matcher, linear in the text for a given pattern (POSIX extended regexes have no
// back-references, the one feature it lacks).
#if defined(__GLIBCXX__)
constexpr auto k_regex_flags = std::regex::extended | std::regex_constants::__polynomial;
#else
constexpr auto k_regex_flags = std::regex::extended;
#endif

using NodePtr = std::shared_ptr<const RowFilter::Node>;
using Node = RowFilter::Node;

struct Parser {
  std::string_view text;
  size_t pos = 0;
  std::vector<std::string> keys;

  Error error(const std::string& what) const {
    return usage_error("--filter '" + std::string(text) + "': " + what + " at position " +
                       std::to_string(pos + 1) +
                       " (e.g. --filter 'state=ACTIVE AND name:train', see 'tpuctl --help')");
  }
  void skip_space() {
    while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) {
      ++pos;
    }
  }
  bool keyword(std::string_view word) {
    skip_space();
    if (text.substr(pos, word.size()) == word &&
        (pos + word.size() == text.size() ||
         std::isspace(static_cast<unsigned char>(text[pos + word.size()])) ||
         text[pos + word.size()] == '(')) {
      pos += word.size();
      return true;
    }
    return false;
  }
  bool at_end() {
    skip_space();
    return pos >= text.size();
  }

  Expected<NodePtr> parse_or() {
    TPUCTL_TRY_ASSIGN(NodePtr first, parse_and());
    auto any = std::make_shared<Node>();
    any->kind = Node::Kind::any;
    any->children.push_back(first);
    while (keyword("OR")) {
      TPUCTL_TRY_ASSIGN(NodePtr next, parse_and());
      any->children.push_back(next);
    }
    return any->children.size() == 1 ? first : NodePtr(any);
  }
  Expected<NodePtr> parse_and() {
    TPUCTL_TRY_ASSIGN(NodePtr first, parse_unary());
    auto all = std::make_shared<Node>();
    all->kind = Node::Kind::all;
    all->children.push_back(first);
    for (;;) {
      skip_space();
      if (at_end() || text[pos] == ')' || text.substr(pos, 3) == "OR " ||
          text.substr(pos) == "OR") {
        break;
      }
      keyword("AND");
      TPUCTL_TRY_ASSIGN(NodePtr next, parse_unary());
      all->children.push_back(next);
    }
    return all->children.size() == 1 ? first : NodePtr(all);
  }
  Expected<NodePtr> parse_unary() {
    skip_space();
    bool negate = keyword("NOT");
    skip_space();
    if (!negate && pos < text.size() && text[pos] == '-') {
      negate = true;
      ++pos;
    }
    TPUCTL_TRY_ASSIGN(NodePtr inner, parse_primary());
    if (!negate) {
      return inner;
    }
    auto n = std::make_shared<Node>();
    n->kind = Node::Kind::negate;
    n->children.push_back(inner);
    return NodePtr(n);
  }
  Expected<NodePtr> parse_primary() {
    skip_space();
    if (pos >= text.size()) {
      return error("expected a term (KEY=VALUE)");
    }
    if (text[pos] == '(') {
      ++pos;
      TPUCTL_TRY_ASSIGN(NodePtr inner, parse_or());
      skip_space();
      if (pos >= text.size() || text[pos] != ')') {
        return error("expected ')'");
      }
      ++pos;
      return inner;
    }
    auto n = std::make_shared<Node>();
    const size_t key_start = pos;
    while (pos < text.size() && (std::isalnum(static_cast<unsigned char>(text[pos])) ||
                                 text[pos] == '_' || text[pos] == '.' || text[pos] == '-')) {
      ++pos;
    }
    n->key = std::string(text.substr(key_start, pos - key_start));
    if (n->key.empty()) {
      return error("expected a field name");
    }
    for (std::string_view op : {"!=", "!~", "<=", ">=", "=", ":", "~", "<", ">"}) {
      if (text.substr(pos, op.size()) == op) {
        n->op = std::string(op);
        pos += op.size();
        break;
      }
    }
    if (n->op.empty()) {
      return error("expected an operator (=, !=, :, ~, !~, <, <=, >, >=) after '" + n->key + "'");
    }
    if (pos < text.size() && (text[pos] == '"' || text[pos] == '\'')) {
      const char quote = text[pos++];
      const size_t end = text.find(quote, pos);
      if (end == std::string_view::npos) {
        return error("unterminated quote");
      }
      n->value = std::string(text.substr(pos, end - pos));
      pos = end + 1;
    } else {
      // A bare value ends at a space, or at a ')' that closes a group rather than one of its own.
      const size_t start = pos;
      int depth = 0;
      while (pos < text.size() && !std::isspace(static_cast<unsigned char>(text[pos]))) {
        if (text[pos] == '(') {
          ++depth;
        } else if (text[pos] == ')' && depth-- == 0) {
          break;
        }
        ++pos;
      }
      n->value = std::string(text.substr(start, pos - start));
      if (n->value.empty()) {
        return error("expected a value after '" + n->key + n->op + "' (quote an empty one: \"\")");
      }
    }
    if (n->op == "~" || n->op == "!~") {
      try {
        n->regex = std::regex(n->value, k_regex_flags);
      } catch (const std::regex_error&) {
        return error("'" + n->value + "' is not a valid regular expression");
      }
    }
    keys.push_back(n->key);
    return NodePtr(n);
  }
};

std::optional<double> number(const std::string& s) {
  if (s.empty()) {
    return std::nullopt;
  }
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  return end && *end == '\0' ? std::optional<double>(v) : std::nullopt;
}

std::string text_of(const Json& v) {
  if (v.is_string()) {
    return v.get<std::string>();
  }
  if (v.is_null()) {
    return "";
  }
  return v.dump();
}

int compare(const std::string& a, const std::string& b) {
  auto x = number(a);
  auto y = number(b);
  if (x && y) {
    return *x < *y ? -1 : (*x > *y ? 1 : 0);
  }
  const std::string la = util::to_lower(a);
  const std::string lb = util::to_lower(b);
  return la < lb ? -1 : (la > lb ? 1 : 0);
}

bool term_matches(const Node& n, const Json& row) {
  const Json v = field_of(row, n.key);
  if (n.op == ":") {
    if (n.value == "*") {
      return !v.is_null() && !(v.is_string() && v.get<std::string>().empty()) &&
             !(v.is_structured() && v.empty());
    }
    if (v.is_array()) {
      for (const auto& e : v) {
        if (compare(text_of(e), n.value) == 0) {
          return true;
        }
      }
      return false;
    }
    return util::to_lower(text_of(v)).find(util::to_lower(n.value)) != std::string::npos;
  }
  const std::string s = text_of(v);
  if (n.op == "~") {
    return std::regex_search(s, n.regex);
  }
  if (n.op == "!~") {
    return !std::regex_search(s, n.regex);
  }
  const int c = compare(s, n.value);
  if (n.op == "=") {
    return c == 0;
  }
  if (n.op == "!=") {
    return c != 0;
  }
  if (n.op == "<") {
    return c < 0;
  }
  if (n.op == "<=") {
    return c <= 0;
  }
  if (n.op == ">") {
    return c > 0;
  }
  return c >= 0;
}

bool eval(const Node& n, const Json& row) {
  switch (n.kind) {
  case Node::Kind::term:
    return term_matches(n, row);
  case Node::Kind::negate:
    return !eval(*n.children.front(), row);
  case Node::Kind::all:
    return std::all_of(n.children.begin(), n.children.end(),
                       [&](const NodePtr& c) { return eval(*c, row); });
  case Node::Kind::any:
    return std::any_of(n.children.begin(), n.children.end(),
                       [&](const NodePtr& c) { return eval(*c, row); });
  }
  return false;
}

// A list index in a dotted key: digits only, small enough for size_t (std::stoul threw on
// "workers.99999999999999999999").
bool is_index(const std::string& part, size_t& index) {
  auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), index);
  return !part.empty() && ec == std::errc() && end == part.data() + part.size();
}

} // namespace

std::vector<std::string> gcloud_alternates(const std::string& key) {
  std::string snake;
  for (char c : key) {
    if (std::isupper(static_cast<unsigned char>(c))) {
      snake += '_';
      snake += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else {
      snake += c;
    }
  }
  std::vector<std::string> out;
  auto add = [&](const std::string& k) {
    if (k != key && std::find(out.begin(), out.end(), k) == out.end()) {
      out.push_back(k);
    }
  };
  add(snake);
  if (snake == "state.state") {
    add("state");
  } else if (snake == "name") {
    add("id");
  } else if (snake == "create_time") {
    add("created_at");
  }
  return out;
}

namespace {

// `key` as path parts: "a.b.0", and gcloud's "a[0].b" (an index) and "a[].b" (every element:
// the part "[]").
std::vector<std::string> key_parts(const std::string& key) {
  std::vector<std::string> parts;
  for (auto part : util::split(key, '.')) {
    for (auto open = part.find('['); open != std::string::npos; open = part.find('[')) {
      const auto close = part.find(']', open);
      if (close == std::string::npos) {
        break;
      }
      if (open > 0) {
        parts.push_back(part.substr(0, open));
      }
      const std::string inside = part.substr(open + 1, close - open - 1);
      parts.push_back(inside.empty() ? "[]" : inside);
      part = part.substr(close + 1);
    }
    if (!part.empty()) {
      parts.push_back(part);
    }
  }
  return parts;
}

Json walk(const Json& at, const std::vector<std::string>& parts, size_t i) {
  const Json* cur = &at;
  for (; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    if (part == "[]" && cur->is_array()) {
      Json out = Json::array();
      for (const auto& element : *cur) {
        Json v = walk(element, parts, i + 1);
        if (!v.is_null()) {
          out.push_back(std::move(v));
        }
      }
      return out;
    }
    if (cur->is_object() && cur->contains(part)) {
      cur = &(*cur)[part];
    } else if (size_t index = 0; cur->is_array() && is_index(part, index) && index < cur->size()) {
      cur = &(*cur)[index];
    } else {
      return Json();
    }
  }
  return *cur;
}

Json exact_field(const Json& row, const std::string& key) {
  return walk(row, key_parts(key), 0);
}

} // namespace

Json field_of(const Json& row, const std::string& key) {
  Json v = exact_field(row, key);
  if (!v.is_null()) {
    return v;
  }
  for (const auto& alt : gcloud_alternates(key)) {
    if (v = exact_field(row, alt); !v.is_null()) {
      return v;
    }
  }
  return v;
}

Expected<RowFilter> RowFilter::parse(std::string_view expr) {
  Parser p;
  p.text = expr;
  RowFilter f;
  if (p.at_end()) {
    return f; // empty: everything passes
  }
  TPUCTL_TRY_ASSIGN(f.m_root, p.parse_or());
  if (!p.at_end()) {
    return p.error("unexpected '" + std::string(expr.substr(p.pos, 1)) + "'");
  }
  f.m_keys = std::move(p.keys);
  return f;
}

bool RowFilter::matches(const Json& row) const {
  return !m_root || eval(*m_root, row);
}

Expected<std::vector<std::string>> parse_value_format(std::string_view format) {
  // FORM[attributes](fields): FORM is value, table or csv; gcloud's [attributes] (no-heading,
  // separator=...) are read by the caller, not here.
  const auto open = format.find_first_of("[(");
  const std::string form(format.substr(0, open == std::string_view::npos ? 0 : open));
  if (form != "value" && form != "table" && form != "csv") {
    return std::vector<std::string>{};
  }
  const auto paren = format.find('(');
  if (paren == std::string_view::npos || format.back() != ')') {
    return usage_error("--format '" + std::string(format) + "': " + form +
                       "(...) needs its fields in '(...)' (e.g. --format '" + form +
                       "(name,state)')");
  }
  std::vector<std::string> fields;
  for (auto& f : util::split(format.substr(paren + 1, format.size() - paren - 2), ',')) {
    // gcloud's table(name:label=NAME, state.state:sort=1): the field is what precedes ':',
    // without the blanks around it.
    const std::string name(util::trim(f.substr(0, f.find(':'))));
    if (name.find_first_of(" \t\n\r\f\v") != std::string::npos) {
      return usage_error("--format '" + std::string(format) + "': field '" + name +
                         "' has a blank inside (fields are names like 'state' or "
                         "'labels.team', separated by ',')");
    }
    if (!name.empty()) {
      fields.push_back(name);
    }
  }
  if (fields.empty()) {
    return usage_error("--format '" + form + "()': name at least one field (e.g. " + form +
                       "(name))");
  }
  return fields;
}

} // namespace tpuctl::cli
