#include "cli/ssh_args.hpp"

#include <cctype>

#include "util/strings.hpp"

namespace tpuctl::cli {

namespace {

std::vector<std::string> split_whitespace(const std::string& text) {
  std::vector<std::string> parts;
  std::string part;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!part.empty()) {
        parts.push_back(std::move(part));
        part.clear();
      }
    } else {
      part += c;
    }
  }
  if (!part.empty()) {
    parts.push_back(std::move(part));
  }
  return parts;
}

Error unsupported(char option, const std::string& word) {
  const std::string name = option == '-' ? word : std::string("-") + option;
  return usage_error("ssh option '" + util::printable(name) +
                     "' is not supported: tpuctl connects with libssh, not the ssh binary, and "
                     "takes only -L, -R, -N and -4 (port forwarding); instead: put other ssh "
                     "settings in ~/.ssh/config or a file named by --ssh-config");
}

// Reads options from words[i] on, as getopt does, and stops at the first word that is not one
// (`--` included, left for the caller).
Status read_options(const std::vector<std::string>& words, size_t& i, SshArgs& out) {
  while (i < words.size()) {
    const std::string& w = words[i];
    if (w.size() < 2 || w[0] != '-' || w == "--") {
      return tpuctl::ok();
    }
    ++i;
    for (size_t c = 1; c < w.size(); ++c) {
      const char o = w[c];
      if (o == 'N' || o == '4') {
        (o == 'N' ? out.no_command : out.ipv4) = true;
        out.options.push_back(std::string("-") + o);
        continue;
      }
      if (o != 'L' && o != 'R') {
        return unsupported(c == 1 && w[1] == '-' ? '-' : o, w);
      }
      const auto kind = o == 'L' ? remote::ForwardKind::local : remote::ForwardKind::remote;
      std::string spec = w.substr(c + 1);
      if (spec.empty()) {
        if (i >= words.size()) {
          return usage_error(std::string("ssh option -") + o + " needs a forward after it: -" + o +
                             " [BIND_ADDRESS:]PORT:HOST:HOSTPORT (e.g. -" + o +
                             " 9001:localhost:9001)");
        }
        spec = words[i++];
      }
      TPUCTL_TRY_ASSIGN(auto forward, remote::parse_forward_spec(kind, spec));
      out.forwards.push_back(std::move(forward));
      out.options.push_back(std::string("-") + o);
      out.options.push_back(spec);
      break; // the rest of the word was the spec
    }
  }
  return tpuctl::ok();
}

} // namespace

Expected<SshArgs> parse_ssh_args(const std::vector<std::string>& ssh_flags,
                                 const std::vector<std::string>& words) {
  SshArgs out;
  std::vector<std::string> flag_words;
  for (const auto& value : ssh_flags) {
    for (auto& part : split_whitespace(value)) {
      if (part != "--") { // gcloud drops it too
        flag_words.push_back(std::move(part));
      }
    }
  }
  size_t i = 0;
  TPUCTL_TRY(read_options(flag_words, i, out));
  if (i < flag_words.size()) {
    return usage_error("--ssh-flag: '" + util::printable(flag_words[i]) +
                       "' is not an ssh option (they start with '-'); give the command with "
                       "--command 'CMD' or after '--'");
  }
  i = 0;
  TPUCTL_TRY(read_options(words, i, out));
  if (i < words.size() && words[i] == "--") {
    ++i; // `-- -L ... -- CMD`: the options end there
  }
  out.command.assign(words.begin() + static_cast<std::ptrdiff_t>(i), words.end());
  return out;
}

} // namespace tpuctl::cli
