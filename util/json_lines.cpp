#include "util/json_lines.hpp"

#include <cctype>

namespace tpuctl::util {

namespace {

class Scanner {
public:
  Scanner(std::string_view text, std::map<std::string, int>& out) : m_text(text), m_out(out) {}

  bool value(const std::string& pointer) {
    skip_space();
    if (m_pos >= m_text.size()) {
      return false;
    }
    m_out[pointer] = m_line;
    char c = m_text[m_pos];
    if ((c == '{' || c == '[') && m_depth >= k_max_depth) {
      return false; // deeper values keep their closest recorded ancestor's line
    }
    if (c == '{') {
      ++m_depth;
      bool ok = object(pointer);
      --m_depth;
      return ok;
    }
    if (c == '[') {
      ++m_depth;
      bool ok = array(pointer);
      --m_depth;
      return ok;
    }
    if (c == '"') {
      std::string ignored;
      return string(ignored);
    }
    while (m_pos < m_text.size() &&
           (std::isalnum(static_cast<unsigned char>(m_text[m_pos])) || m_text[m_pos] == '-' ||
            m_text[m_pos] == '+' || m_text[m_pos] == '.')) {
      ++m_pos;
    }
    return true;
  }

private:
  bool object(const std::string& pointer) {
    ++m_pos; // '{'
    skip_space();
    if (peek() == '}') {
      ++m_pos;
      return true;
    }
    while (true) {
      skip_space();
      std::string key;
      if (peek() != '"' || !string(key)) {
        return false;
      }
      skip_space();
      if (peek() != ':') {
        return false;
      }
      ++m_pos;
      if (!value(pointer + "/" + escape(key))) {
        return false;
      }
      skip_space();
      if (peek() == ',') {
        ++m_pos;
        continue;
      }
      if (peek() == '}') {
        ++m_pos;
        return true;
      }
      return false;
    }
  }

  bool array(const std::string& pointer) {
    ++m_pos; // '['
    skip_space();
    if (peek() == ']') {
      ++m_pos;
      return true;
    }
    for (size_t i = 0;; ++i) {
      if (!value(pointer + "/" + std::to_string(i))) {
        return false;
      }
      skip_space();
      if (peek() == ',') {
        ++m_pos;
        continue;
      }
      if (peek() == ']') {
        ++m_pos;
        return true;
      }
      return false;
    }
  }

  // Reads a string token; `out` gets its raw text (escapes kept except \" and \\).
  bool string(std::string& out) {
    ++m_pos; // opening quote
    while (m_pos < m_text.size()) {
      char c = m_text[m_pos++];
      if (c == '"') {
        return true;
      }
      if (c == '\\' && m_pos < m_text.size()) {
        char e = m_text[m_pos++];
        out += (e == '"' || e == '\\' || e == '/') ? e : '\\';
        if (!(e == '"' || e == '\\' || e == '/')) {
          out += e;
        }
        continue;
      }
      if (c == '\n') {
        ++m_line;
      }
      out += c;
    }
    return false;
  }

  static std::string escape(const std::string& key) {
    std::string out;
    for (char c : key) {
      if (c == '~') {
        out += "~0";
      } else if (c == '/') {
        out += "~1";
      } else {
        out += c;
      }
    }
    return out;
  }

  void skip_space() {
    while (m_pos < m_text.size() && std::isspace(static_cast<unsigned char>(m_text[m_pos]))) {
      if (m_text[m_pos] == '\n') {
        ++m_line;
      }
      ++m_pos;
    }
  }
  char peek() const { return m_pos < m_text.size() ? m_text[m_pos] : '\0'; }

  // One recursion per level, and every level's pointer is a copy of its parent's plus one
  // segment: 20,000 nested '[' (a 40 KB file) overflowed the stack and would have stored 400 MB
  // of pointers. Real documents are a few levels deep.
  static constexpr int k_max_depth = 256;

  std::string_view m_text;
  std::map<std::string, int>& m_out;
  int m_depth = 0;
  size_t m_pos = 0;
  int m_line = 1;
};

} // namespace

std::map<std::string, int> json_pointer_lines(std::string_view text) {
  std::map<std::string, int> out;
  Scanner(text, out).value("");
  return out;
}

int line_of(const std::map<std::string, int>& lines, std::string pointer) {
  while (true) {
    auto it = lines.find(pointer);
    if (it != lines.end()) {
      return it->second;
    }
    if (pointer.empty()) {
      return 0;
    }
    auto slash = pointer.rfind('/');
    pointer = slash == std::string::npos ? "" : pointer.substr(0, slash);
  }
}

} // namespace tpuctl::util
