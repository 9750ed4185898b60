#include "remote/ssh_config.hpp"

#include <cstdlib>
#include <fstream>
#include <glob.h>
#include <map>
#include <memory>
#include <mutex>
#include <pwd.h>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include "remote/file_cache.hpp"
#include "remote/known_hosts.hpp"
#include "util/process.hpp"
#include "util/strings.hpp"

namespace tpuctl::remote {

namespace {

struct ConfigLine {
  size_t number = 0;
  std::string keyword; // lowercased
  std::vector<std::string> args;
};

struct ConfigFile {
  std::string path;
  bool exists = false;
  std::vector<ConfigLine> lines;
};

// One line split as readconf does: the keyword up to a blank or `=`, one optional `=` between it
// and its value, then words separated by blanks with "double quotes" grouping; a line or a word
// starting with `#` ends it.
std::vector<std::string> split_line(const std::string& text) {
  std::vector<std::string> words;
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  size_t i = 0;
  while (i < text.size() && blank(text[i])) {
    ++i;
  }
  if (i >= text.size() || text[i] == '#') {
    return words;
  }
  std::string keyword;
  while (i < text.size() && !blank(text[i]) && text[i] != '=') {
    keyword += text[i++];
  }
  words.push_back(keyword);
  while (i < text.size() && blank(text[i])) {
    ++i;
  }
  if (i < text.size() && text[i] == '=') {
    ++i;
  }
  while (true) {
    while (i < text.size() && blank(text[i])) {
      ++i;
    }
    if (i >= text.size() || text[i] == '#') {
      break;
    }
    std::string word;
    bool quoted = false;
    while (i < text.size() && (quoted || !blank(text[i]))) {
      if (text[i] == '"') {
        quoted = !quoted;
      } else {
        word += text[i];
      }
      ++i;
    }
    words.push_back(word);
  }
  return words;
}

// Every occurrence of `from` in `text` replaced by `to`.
std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

std::shared_ptr<const ConfigFile> load_config(const std::string& path) {
  static FileCache<ConfigFile> cache;
  auto loaded = cache.get(path, [&](const std::string& text, bool exists) -> Expected<ConfigFile> {
    ConfigFile file;
    file.path = path;
    file.exists = exists;
    std::istringstream in(text);
    size_t number = 0;
    for (std::string line_text; std::getline(in, line_text);) {
      ++number;
      std::vector<std::string> words = split_line(line_text);
      if (words.empty() || words[0].empty()) {
        continue;
      }
      ConfigLine line;
      line.number = number;
      line.keyword = util::to_lower(words[0]);
      line.args.assign(words.begin() + 1, words.end());
      file.lines.push_back(std::move(line));
    }
    return file;
  });
  return *loaded; // the parse never fails
}

struct Passwd {
  std::string name, dir;
  unsigned uid = 0;
};

Passwd real_user() {
  Passwd p;
  p.uid = ::getuid();
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (::getpwuid_r(p.uid, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
    p.name = pw.pw_name ? pw.pw_name : "";
    p.dir = pw.pw_dir ? pw.pw_dir : "";
  }
  if (p.dir.empty()) {
    const char* home = std::getenv("HOME");
    p.dir = home ? home : "/";
  }
  if (p.name.empty()) {
    const char* user = std::getenv("USER");
    p.name = user ? user : std::to_string(p.uid);
  }
  return p;
}

bool yes(const std::string& v) {
  const std::string l = util::to_lower(v);
  return l == "yes" || l == "true";
}

std::string this_host(bool short_name) {
  char name[256] = {0};
  ::gethostname(name, sizeof(name) - 1);
  std::string h = name;
  return short_name ? h.substr(0, h.find('.')) : h;
}

struct Evaluation {
  Evaluation(const SshConfigQuery& query, SshResolved& resolved)
      : q(query), r(resolved), pw(real_user()) {}
  const SshConfigQuery& q;
  SshResolved& r;
  Passwd pw;
  bool final_pass = false;
  bool want_final = false;
  std::map<std::string, bool> set; // keywords already given a value
  std::vector<std::string> ukh, gkh;

  // Takes the first value of a keyword: true when this one is it.
  bool first(const std::string& keyword) { return set.emplace(keyword, true).second; }

  std::string where(const ConfigFile& f, const ConfigLine& l) const {
    return "ssh config '" + f.path + "' line " + std::to_string(l.number);
  }

  std::string match_host() const {
    if (set.count("hostname") == 0) {
      return r.host_arg;
    }
    return final_pass ? r.hostname : replace_all(r.hostname, "%h", r.host_arg);
  }

  Expected<bool> match_line(const ConfigFile& f, const ConfigLine& l) {
    bool result = true;
    size_t attributes = 0;
    for (size_t i = 0; i < l.args.size(); ++i) {
      std::string attrib = l.args[i];
      const bool negate = !attrib.empty() && attrib[0] == '!';
      if (negate) {
        attrib.erase(0, 1);
      }
      attrib = util::to_lower(attrib);
      if (attrib == "all") {
        if (attributes > 0 || i + 1 < l.args.size()) {
          return Error{ErrorKind::usage,
                       where(f, l) + ": 'all' cannot be combined with other Match attributes"};
        }
        return result && !negate;
      }
      ++attributes;
      if (attrib == "canonical" || attrib == "final") {
        want_final = want_final || attrib == "final";
        if (final_pass == negate) {
          result = false;
        }
        continue;
      }
      if (i + 1 >= l.args.size()) {
        return Error{ErrorKind::usage,
                     where(f, l) + ": Match " + attrib + " needs an argument (ssh_config(5))"};
      }
      const std::string& arg = l.args[++i];
      bool r_ = false;
      const std::string user = set.count("user") ? r.user : pw.name;
      if (attrib == "host") {
        r_ = host_patterns_match(arg, util::to_lower(match_host()));
      } else if (attrib == "originalhost") {
        r_ = host_patterns_match(arg, util::to_lower(r.host_arg));
      } else if (attrib == "user") {
        r_ = host_patterns_match(arg, user);
      } else if (attrib == "localuser") {
        r_ = host_patterns_match(arg, pw.name);
      } else if (attrib == "exec") {
        if (!result) {
          continue; // ssh skips an exec once the line has failed
        }
        const std::string port = std::to_string(set.count("port") ? r.port : 22);
        std::string cmd = arg;
        cmd = expand_tokens(cmd, match_host(), port, user);
        auto ran = util::run_process({"/bin/sh", "-c", cmd}, {});
        r_ = ran && ran->exit_code == 0;
      } else {
        return Error{ErrorKind::usage, where(f, l) + ": unsupported Match attribute '" + attrib +
                                           "' (tpuctl reads all, host, originalhost, user, "
                                           "localuser, exec, canonical and final)"};
      }
      if (r_ == negate) {
        result = false;
      }
    }
    if (attributes == 0) {
      return Error{ErrorKind::usage, where(f, l) + ": Match with no criteria (ssh_config(5))"};
    }
    return result;
  }

  // %-tokens as ssh's default_client_percent_expand, with `host` for %h.
  std::string expand_tokens(const std::string& in, const std::string& host, const std::string& port,
                            const std::string& user) const {
    std::string out;
    for (size_t i = 0; i < in.size(); ++i) {
      if (in[i] != '%' || i + 1 >= in.size()) {
        out += in[i];
        continue;
      }
      const char t = in[++i];
      switch (t) {
      case '%': out += '%'; break;
      case 'd': out += pw.dir; break;
      case 'h': out += host; break;
      case 'i': out += std::to_string(pw.uid); break;
      case 'k': out += r.host_key_alias.empty() ? r.host_arg : r.host_key_alias; break;
      case 'L': out += this_host(true); break;
      case 'l': out += this_host(false); break;
      case 'n': out += r.host_arg; break;
      case 'p': out += port; break;
      case 'r': out += user; break;
      case 'u': out += pw.name; break;
      default: out += '%'; out += t;
      }
    }
    return out;
  }

  Expected<void> apply(const ConfigFile& f, const ConfigLine& l) {
    const std::string& k = l.keyword;
    const std::string v = l.args.empty() ? std::string() : l.args[0];
    if (k == "identityfile") {
      if (!v.empty()) {
        r.identity_files.push_back(v);
      }
      return {};
    }
    if (k == "certificatefile") {
      if (!v.empty()) {
        r.certificate_files.push_back(v);
      }
      return {};
    }
    if (l.args.empty()) {
      return {};
    }
    if (k == "hostname" && first(k)) {
      r.hostname = v;
    } else if (k == "port" && first(k)) {
      const int port = std::atoi(v.c_str());
      if (port <= 0 || port > 65535 || v.find_first_not_of("0123456789") != std::string::npos) {
        return Error{ErrorKind::usage,
                     where(f, l) + ": bad Port '" + v + "' (give a number from 1 to 65535)"};
      }
      r.port = static_cast<uint16_t>(port);
    } else if (k == "user" && first(k)) {
      r.user = v;
    } else if (k == "hostkeyalias" && first(k)) {
      r.host_key_alias = util::to_lower(v);
    } else if (k == "userknownhostsfile" && first(k)) {
      ukh = l.args;
    } else if (k == "globalknownhostsfile" && first(k)) {
      gkh = l.args;
    } else if (k == "hashknownhosts" && first(k)) {
      r.hash_known_hosts = yes(v);
    } else if (k == "checkhostip" && first(k)) {
      r.check_host_ip = yes(v);
    } else if (k == "identitiesonly" && first(k)) {
      r.identities_only = yes(v);
    } else if (k == "stricthostkeychecking" && first(k)) {
      r.strict_host_key_checking = util::to_lower(v);
    } else if (k == "proxyjump" && set.count("proxycommand") == 0 && first(k)) {
      r.proxy_jump = v;
    } else if (k == "proxycommand" && set.count("proxyjump") == 0 && first(k)) {
      std::string joined;
      for (const auto& a : l.args) {
        joined += (joined.empty() ? "" : " ") + a;
      }
      r.proxy_command = joined;
    }
    return {};
  }

  Expected<void> read(const std::string& path, bool& active, bool never_match, int depth,
                      bool must_exist) {
    if (depth > 16) {
      return Error{ErrorKind::usage, "ssh config '" + path + "': Include nested too deeply"};
    }
    auto f = load_config(path);
    if (!f->exists) {
      if (must_exist) {
        return Error{ErrorKind::usage, "cannot read the ssh config '" + path +
                                           "': give a readable file to --ssh-config"};
      }
      return {};
    }
    if (depth == 0) {
      r.config_files.push_back(path);
    }
    for (const ConfigLine& l : f->lines) {
      if (l.keyword == "host") {
        bool found = false, rejected = false;
        for (const auto& p : l.args) {
          if (p.size() > 1 && p[0] == '!') {
            rejected = rejected || host_patterns_match(p.substr(1), util::to_lower(r.host_arg));
          } else {
            found = found || host_patterns_match(p, util::to_lower(r.host_arg));
          }
        }
        active = !never_match && found && !rejected;
      } else if (l.keyword == "match") {
        TPUCTL_TRY_ASSIGN(bool m, match_line(*f, l));
        active = !never_match && m;
      } else if (l.keyword == "include") {
        for (const auto& arg : l.args) {
          std::string pattern = expand_user_path(arg);
          if (pattern.empty() || pattern[0] != '/') {
            pattern = (depth == 0 && path == q.system_config ? std::string("/etc/ssh/")
                                                              : pw.dir + "/.ssh/") +
                      pattern;
          }
          glob_t g{};
          if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
            for (size_t i = 0; i < g.gl_pathc; ++i) {
              bool inner = active;
              r.config_files.push_back(g.gl_pathv[i]);
              TPUCTL_TRY(read(g.gl_pathv[i], inner, never_match || !active, depth + 1, false));
            }
          }
          ::globfree(&g);
        }
      } else if (active) {
        TPUCTL_TRY(apply(*f, l));
      }
    }
    return {};
  }

  Expected<void> pass() {
    if (!q.process_config) {
      return {};
    }
    bool active = true;
    if (!q.config_file.empty()) {
      return read(expand_user_path(q.config_file), active, false, 0, true);
    }
    TPUCTL_TRY(read(pw.dir + "/.ssh/config", active, false, 0, false));
    active = true;
    return read(q.system_config, active, false, 0, false);
  }

  Expected<std::vector<std::string>> known_hosts_files(const std::vector<std::string>& given,
                                                       const std::string& what) const {
    std::vector<std::string> out;
    if (!given.empty() && util::to_lower(given[0]) == "none") {
      if (given.size() > 1) {
        return Error{ErrorKind::usage,
                     what + " 'none' appears with other files: give none, or only files"};
      }
      return out;
    }
    const std::string port = std::to_string(r.port);
    for (const auto& g : given) {
      if (g.find("%C") != std::string::npos) {
        return Error{ErrorKind::usage, what + " '" + g +
                                           "' uses %C, which tpuctl does not expand: name the "
                                           "file without it"};
      }
      std::string p = expand_tokens(expand_user_path(g), r.hostname, port, r.user);
      // ${VAR}: the environment, as ssh's dollar expansion; an unset one is an error.
      for (size_t at = p.find("${"); at != std::string::npos; at = p.find("${", at)) {
        const size_t end = p.find('}', at);
        if (end == std::string::npos) {
          break;
        }
        const std::string name = p.substr(at + 2, end - at - 2);
        const char* value = std::getenv(name.c_str());
        if (value == nullptr) {
          return Error{ErrorKind::usage, what + " '" + g + "' names the environment variable " +
                                             name + ", which is not set"};
        }
        p.replace(at, end - at + 1, value);
        at += std::string_view(value).size();
      }
      out.push_back(p);
    }
    return out;
  }
};

} // namespace

std::string user_home() {
  return real_user().dir;
}

std::string expand_user_path(std::string_view path) {
  if (path.empty() || path[0] != '~') {
    return std::string(path);
  }
  const size_t slash = path.find('/');
  const std::string who(path.substr(1, slash == std::string_view::npos ? path.npos : slash - 1));
  std::string home;
  if (who.empty()) {
    home = user_home();
  } else {
    std::vector<char> buf(16384);
    passwd pw{};
    passwd* found = nullptr;
    if (::getpwnam_r(who.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
      return std::string(path);
    }
    home = pw.pw_dir;
  }
  if (slash == std::string_view::npos) {
    return home;
  }
  return (home == "/" ? std::string() : home) + std::string(path.substr(slash));
}

Expected<SshResolved> resolve_ssh_config(const SshConfigQuery& query) {
  SshResolved r;
  r.host_arg = query.host;
  Evaluation e(query, r);
  if (query.port != 0) {
    r.port = query.port;
    e.set["port"] = true;
  }
  if (!query.user.empty()) {
    r.user = query.user;
    e.set["user"] = true;
  }
  TPUCTL_TRY(e.pass());
  if (e.want_final) {
    if (e.set.count("hostname")) {
      r.hostname = replace_all(r.hostname, "%h", r.host_arg);
    }
    e.final_pass = true;
    r.config_files.clear();
    TPUCTL_TRY(e.pass());
  }
  r.hostname = util::to_lower(
      e.set.count("hostname") ? replace_all(r.hostname, "%h", r.host_arg) : r.host_arg);
  if (r.user.empty()) {
    r.user = e.pw.name;
  }
  if (e.ukh.empty()) {
    e.ukh = {"~/.ssh/known_hosts", "~/.ssh/known_hosts2"};
  }
  if (e.gkh.empty()) {
    e.gkh = {"/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"};
  }
  TPUCTL_TRY_ASSIGN(r.user_known_hosts, e.known_hosts_files(e.ukh, "UserKnownHostsFile"));
  TPUCTL_TRY_ASSIGN(r.global_known_hosts, e.known_hosts_files(e.gkh, "GlobalKnownHostsFile"));
  return r;
}

std::string expand_config_path(const SshResolved& r, std::string_view raw) {
  SshConfigQuery q;
  SshResolved copy = r;
  Evaluation e(q, copy);
  return e.expand_tokens(expand_user_path(raw), r.hostname, std::to_string(r.port), r.user);
}

std::string known_hosts_lookup_name(const SshResolved& r) {
  return r.host_key_alias.empty() ? known_hosts_name(r.hostname, r.port) : r.host_key_alias;
}

} // namespace tpuctl::remote
