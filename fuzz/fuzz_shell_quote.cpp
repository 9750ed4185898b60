// The quoting of everything tpuctl puts into a remote command line and a worker's environment:
// util::shell_quote, shell_quote_path, shell_join and provision::env_command_prefix / to_dotenv.
// Input: arbitrary bytes (a NUL cannot be in an environment value: the input is cut at the
// first). Property: the quoted text, read back by a small POSIX shell word reader (quotes and
// backslashes, tokenization at blanks and ';'), gives back exactly the input bytes, and nothing
// in it is left for the shell to expand. tests/unit/provision/test_worker_env.cpp checks the
// same property with a real sh.
#include <optional>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.hpp"
#include "provision/slice/worker_env.hpp"
#include "util/shell_quote.hpp"

using namespace tpuctl;

namespace {

// One shell word of `text` from `pos`, as POSIX sh reads it: '...' is literal, \c outside quotes
// is c, blanks, newlines and ';' end the word. nullopt when the word holds anything the shell
// would expand or treat as syntax ($, `, ", unquoted |&<>(){}*?[]~#) or a quote is unterminated.
// `expandable_prefix`: a leading "$HOME"/ (shell_quote_path's form) reads as "~/".
std::optional<std::string> read_word(const std::string& text, size_t& pos,
                                     bool expandable_prefix = false) {
  std::string out;
  if (expandable_prefix && text.compare(pos, 8, "\"$HOME\"/") == 0) {
    out = "~/";
    pos += 8;
  } else if (expandable_prefix && text.compare(pos, 7, "\"$HOME\"") == 0) {
    out = "~";
    pos += 7;
  }
  while (pos < text.size()) {
    const char c = text[pos];
    if (c == ' ' || c == '\t' || c == '\n' || c == ';') {
      break;
    }
    if (c == '\'') {
      const size_t end = text.find('\'', pos + 1);
      if (end == std::string::npos) {
        return std::nullopt;
      }
      out += text.substr(pos + 1, end - pos - 1);
      pos = end + 1;
    } else if (c == '\\') {
      if (pos + 1 >= text.size() || text[pos + 1] == '\n') {
        return std::nullopt;
      }
      out += text[pos + 1];
      pos += 2;
    } else if (std::string_view("$`\"|&<>(){}*?[]~#=").find(c) != std::string_view::npos) {
      return std::nullopt;
    } else {
      out += c;
      ++pos;
    }
  }
  return out;
}

// The whole of `text` as exactly one word.
std::optional<std::string> one_word(const std::string& text, bool expandable_prefix = false) {
  size_t pos = 0;
  auto word = read_word(text, pos, expandable_prefix);
  return pos == text.size() ? word : std::nullopt;
}

void expect(const std::string& text, size_t& pos, std::string_view literal) {
  FUZZ_CHECK(text.compare(pos, literal.size(), literal) == 0,
             "expected '" + std::string(literal) + "' at " + std::to_string(pos) + " of " + text);
  pos += literal.size();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) {
    return 0;
  }
  std::string value = fuzz::text_of(data, size);
  value = value.substr(0, value.find('\0'));

  const std::string quoted = util::shell_quote(value);
  FUZZ_CHECK(one_word(quoted) == value, "shell_quote: " + quoted);

  const std::string path = util::shell_quote_path(value);
  FUZZ_CHECK(one_word(path, true) == value, "shell_quote_path: " + path);

  const std::string joined = util::shell_join({value, "--", value});
  size_t pos = 0;
  for (int i = 0; i < 3; ++i) {
    FUZZ_CHECK(read_word(joined, pos) == (i == 1 ? "--" : value), "shell_join: " + joined);
    if (i < 2) {
      expect(joined, pos, " ");
    }
  }
  FUZZ_CHECK(pos == joined.size(), "shell_join: " + joined);

  // export A='v' TPU_NAME='v' TPUCTL_PYTHON_ENV='v'; export PATH='/agent':<v>/bin:"$PATH"
  // PYTHONPATH='/agent/python'${PYTHONPATH:+:"$PYTHONPATH"}; (the Python environment's bin is one
  // quoted path, read back whole).
  const provision::EnvVars env = {{"A", value}, {"TPU_NAME", value}, {"TPUCTL_PYTHON_ENV", value}};
  const std::string prefix = provision::env_command_prefix(env, value.empty() ? "" : "/agent");
  pos = 0;
  expect(prefix, pos, "export ");
  for (size_t i = 0; i < env.size(); ++i) {
    expect(prefix, pos, env[i].first + "=");
    FUZZ_CHECK(read_word(prefix, pos) == env[i].second, "env_command_prefix: " + prefix);
    expect(prefix, pos, i + 1 < env.size() ? " " : "; ");
  }
  if (!value.empty()) {
    expect(prefix, pos, "export PATH='/agent':");
    const std::string bin = util::shell_quote_path(value + "/bin");
    FUZZ_CHECK(one_word(bin, true) == value + "/bin", "env_command_prefix: " + prefix);
    expect(prefix, pos, bin);
    expect(prefix, pos, ":\"$PATH\" PYTHONPATH='/agent/python'${PYTHONPATH:+:\"$PYTHONPATH\"}; ");
  }
  FUZZ_CHECK(pos == prefix.size(), "env_command_prefix: " + prefix);

  // KEY='value' lines (a value's newlines stay inside its quotes).
  const std::string dotenv = provision::to_dotenv(env);
  pos = 0;
  for (const auto& [name, v] : env) {
    expect(dotenv, pos, name + "=");
    FUZZ_CHECK(read_word(dotenv, pos) == v, "to_dotenv: " + dotenv);
    expect(dotenv, pos, "\n");
  }
  FUZZ_CHECK(pos == dotenv.size(), "to_dotenv: " + dotenv);
  return 0;
}
