#include "cli/completion.hpp"

#include <algorithm>
#include <optional>

#include "cli/config.hpp"
#include "topology/accelerator_type.hpp"
#include "topology/generation.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

namespace {

// The option named `word` ("--name", "-n") usable at `app`: its own, or a parent's (global
// flags fall through).
const CLI::Option* find_option(const CLI::App& app, std::string_view word) {
  for (const CLI::App* a = &app; a; a = a->get_parent()) {
    for (const CLI::Option* opt : a->get_options()) {
      if (util::starts_with(word, "--")) {
        for (const auto& l : opt->get_lnames()) {
          if (word.substr(2) == l) {
            return opt;
          }
        }
      } else if (word.size() == 2 && word[0] == '-') {
        for (const auto& s : opt->get_snames()) {
          if (word.substr(1) == s) {
            return opt;
          }
        }
      }
    }
  }
  return nullptr;
}

bool takes_value(const CLI::Option* opt) {
  return !opt->get_positional() && opt->get_type_size_max() > 0;
}

const CLI::App* find_subcommand(const CLI::App& app, const std::string& word) {
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->check_name(word)) {
      return sub;
    }
  }
  return nullptr;
}

// The top-level group `app` belongs to ("workload" for `tpuctl workload describe`).
std::string group_of(const CLI::App& app) {
  const CLI::App* a = &app;
  while (a->get_parent() && a->get_parent()->get_parent()) {
    a = a->get_parent();
  }
  return a->get_parent() ? a->get_name() : "";
}

// What a positional or a flag value names, from its declared name and the command's group.
std::optional<LiveKind> live_kind(const CLI::App& app, const std::string& name) {
  const std::string group = group_of(app);
  if (name == "pool" || (group == "pool" && name == "NAME") || name == "LOCATION") {
    return LiveKind::pools;
  }
  if (name == "cluster" || (group == "cluster" && name == "NAME")) {
    return LiveKind::clusters;
  }
  if ((group == "workload" && name == "W") || name == "workload" ||
      name == "wait-for-job-completion") {
    return LiveKind::workloads;
  }
  if (name == "QR_ID" && app.get_name() != "create") {
    return LiveKind::queued_resources;
  }
  if (name == "NODE" || (name == "TARGET" && group == "tpu-vm")) {
    return LiveKind::node_ids;
  }
  if (name == "TARGET" || name == "NODE_ID") {
    return LiveKind::nodes;
  }
  if (name == "HOST" || name == "HOSTS" || name == "hosts") {
    return LiveKind::hosts;
  }
  if (name == "node") {
    return LiveKind::subject_nodes;
  }
  if (name == "worker") {
    return LiveKind::subject_workers;
  }
  return std::nullopt;
}

// Whether an option takes a path: by its value's name (PATH, FILE, DIR, K=FILE) or, for a
// positional, its name (FILE, PATHS). "" when not, else the marker.
std::string path_marker(const CLI::Option& opt) {
  const std::string type = opt.get_type_name();
  const std::string name = opt.get_name();
  // A flag named for a path takes one whatever its value is called (--identity-file F).
  const auto named = [&](const char* suffix) {
    return std::any_of(opt.get_lnames().begin(), opt.get_lnames().end(),
                       [&](const std::string& l) { return l.ends_with(suffix); });
  };
  if (type == "DIR" || named("-dir") || named("-directory")) {
    return k_dirs_marker;
  }
  if (type == "PATH" || type == "FILE" || type == "K=FILE" || name == "FILE" || name == "PATHS" ||
      named("-file")) {
    return k_files_marker;
  }
  return "";
}

// The values for the option `opt` given `typed` so far (fixed first, else live, else file
// names), `subject` being what the command is about.
std::vector<Candidate> option_values(const CLI::App& app, const CLI::Option& opt,
                                     const std::string& typed, const std::string& subject,
                                     const LiveValues& live) {
  std::vector<Candidate> out;
  const std::string name = opt.get_lnames().empty() ? opt.get_name() : opt.get_lnames().front();
  if (opt.get_type_name() == "K=FILE") {
    // --metadata-from-file KEY=PATH: the key first, then a file name after '='.
    if (typed.find('=') == std::string::npos) {
      return {{"startup-script=", "the script every worker runs after provisioning"}};
    }
    return {{std::string(k_files_marker) + "\t" + typed.substr(0, typed.find('=') + 1), ""}};
  }
  if (const std::string marker = path_marker(opt); !marker.empty()) {
    out.push_back({marker, ""});
    if (name == "PATHS" && live && group_of(app) != "pool") {
      // scp's remote side: TARGET: for every queued resource and node.
      for (auto& v : live(LiveKind::nodes, subject)) {
        out.push_back({v + ":", ""});
      }
    }
    return out;
  }
  for (auto& v : fixed_values(name)) {
    out.push_back({v, ""});
  }
  if (name == "worker") {
    out.clear(); // all first, then each worker of the subject, then the list and range forms
    out.push_back({"all", "every worker"});
  }
  if (auto kind = live_kind(app, name); kind && live && (out.empty() || name == "worker")) {
    for (auto& v : live(*kind, subject)) {
      out.push_back({v, ""});
    }
  }
  return out;
}

std::vector<Candidate> with_prefix(std::vector<Candidate> all, const std::string& typed,
                                   const std::string& prepend = "") {
  std::vector<Candidate> out;
  std::vector<std::string> seen;
  for (auto& c : all) {
    if (c.value == k_files_marker || c.value == k_dirs_marker ||
        util::starts_with(c.value, std::string(k_files_marker) + "\t")) {
      out.insert(out.begin(), c); // the shell filters file names itself
      continue;
    }
    std::string value = prepend + c.value;
    if (util::starts_with(value, typed) &&
        std::find(seen.begin(), seen.end(), value) == seen.end()) {
      seen.push_back(value);
      out.push_back({value, c.description});
    }
  }
  return out;
}

// Every topology of the catalogue once, in catalogue order ("2x2", "4x4x4").
std::vector<std::string> topologies() {
  std::vector<std::string> out;
  for (const auto& t : topology::catalogue()) {
    if (std::find(out.begin(), out.end(), t.topology()) == out.end()) {
      out.push_back(t.topology());
    }
  }
  return out;
}

} // namespace

std::vector<std::string> fixed_values(std::string_view name) {
  if (name == "format") {
    return {"table", "json", "yaml", "none"};
  }
  if (name == "verbosity") {
    return {"debug", "info", "warning", "error", "none"};
  }
  if (name == "generation" || name == "type") {
    std::vector<std::string> out;
    for (const auto& g : topology::generations()) {
      out.emplace_back(g.name);
      if (g.type_prefix != g.name) {
        out.emplace_back(g.type_prefix); // gcloud's --type v5litepod
      }
    }
    return out;
  }
  if (name == "accelerator-type" || name == "tpu-type" || name == "TYPE" ||
      name == "ACCELERATOR_TYPE") {
    std::vector<std::string> out;
    for (const auto& t : topology::catalogue()) {
      out.push_back(t.name);
    }
    return out;
  }
  if (name == "topology") {
    return topologies();
  }
  if (name == "for") {
    std::vector<std::string> out{"delete"};
    for (const char* s : {"ACCEPTED", "WAITING_FOR_RESOURCES", "PROVISIONING", "ACTIVE",
                          "SUSPENDING", "SUSPENDED", "FAILED", "DELETING"}) {
      out.push_back(std::string("state=") + s);
    }
    return out;
  }
  if (name == "KEY") {
    return {"pool",
            "state",
            "format",
            "ssh.user",
            "ssh.identity_file",
            "ssh.batch_size",
            "ssh.strict_host_key_checking"};
  }
  if (name == "dataflow") {
    return {"ws", "os", "is"};
  }
  if (name == "dtype") {
    return {"int8", "bf16", "fp32"};
  }
  if (name == "output") {
    return {"prefixed", "grouped", "jsonl"};
  }
  if (name == "strict-host-key-checking") {
    return {"yes", "accept-new", "no"};
  }
  if (name == "env-profile") {
    return {"none", "torchrun", "slurm", "skypilot"};
  }
  if (name == "fail-policy") {
    return {"any", "all"};
  }
  if (name == "on-preemption") {
    return {"suspend", "requeue"};
  }
  if (name == "provisioning-model") {
    return {"standard", "spot", "flex-start", "reservation-bound"};
  }
  if (name == "container-runtime") {
    return {"auto", "docker", "podman"};
  }
  if (name == "filter-by-status") {
    return {"EVERYTHING", "RUNNING", "QUEUED", "FINISHED", "FAILED", "SUCCESSFUL"};
  }
  if (name == "batch-size") {
    return {"all", "64"};
  }
  if (name == "mode") {
    return {"scalesim", "tpu"};
  }
  return {};
}

std::vector<Candidate> complete(const CLI::App& root, const std::vector<std::string>& words,
                                const LiveValues& live) {
  const std::string typed = words.empty() ? "" : words.back();
  const CLI::App* app = &root;
  const CLI::Option* pending = nullptr; // a flag whose value comes next
  std::vector<std::string> given;       // the current command's positionals so far
  std::string subject;                  // what it is about: its first positional, or a flag's
  bool options_ended = false;
  for (size_t i = 0; i + 1 < words.size(); ++i) {
    const std::string& w = words[i];
    if (pending) {
      const auto& names = pending->get_lnames();
      if (!names.empty() && (names.front() == "workload" || names.front() == "cluster") &&
          subject.empty()) {
        subject = w;
      }
      pending = nullptr;
      continue;
    }
    if (options_ended) {
      given.push_back(w);
      continue;
    }
    if (w == "--") {
      options_ended = true;
      continue;
    }
    if (util::starts_with(w, "-") && w.size() > 1) {
      const CLI::Option* opt = find_option(*app, w.substr(0, w.find('=')));
      if (opt && takes_value(opt) && w.find('=') == std::string::npos) {
        pending = opt;
      } else if (opt && w.find('=') != std::string::npos && subject.empty() &&
                 (util::starts_with(w, "--workload=") || util::starts_with(w, "--cluster="))) {
        subject = w.substr(w.find('=') + 1);
      }
      continue;
    }
    if (const CLI::App* sub = find_subcommand(*app, w)) {
      app = sub;
      given.clear();
      continue;
    }
    given.push_back(w);
    if (given.size() == 1) {
      // scp's first path names its target before the ':' ("qr-1:~/x"); others name it whole.
      const auto colon = w.find(':');
      subject = colon == std::string::npos || w.find('/') < colon ? w : w.substr(0, colon);
      if (const auto at = subject.find('@'); at != std::string::npos) {
        subject = subject.substr(at + 1); // [USER@]TARGET
      }
    }
  }
  if (pending) {
    return with_prefix(option_values(*app, *pending, typed, subject, live), typed);
  }
  if (util::starts_with(typed, "--") && typed.find('=') != std::string::npos) {
    const std::string flag = typed.substr(0, typed.find('='));
    const CLI::Option* opt = find_option(*app, flag);
    if (opt == nullptr) {
      return {};
    }
    auto values = option_values(*app, *opt, typed.substr(flag.size() + 1), subject, live);
    for (auto& v : values) {
      if (v.value == k_files_marker || v.value == k_dirs_marker) {
        v.value += "\t" + flag + "=";
      } else if (util::starts_with(v.value, std::string(k_files_marker) + "\t")) {
        v.value.insert(std::string(k_files_marker).size() + 1, flag + "=");
      }
    }
    return with_prefix(values, typed, flag + "=");
  }
  std::vector<Candidate> out;
  if (util::starts_with(typed, "-")) {
    for (const CLI::App* a = app; a; a = a->get_parent()) {
      for (const CLI::Option* opt : a->get_options()) {
        if (opt->get_group().empty()) {
          continue; // hidden
        }
        for (const auto& l : opt->get_lnames()) {
          out.push_back({"--" + l, opt->get_description()});
        }
      }
    }
    return with_prefix(out, typed);
  }
  if (options_ended) {
    return {};
  }
  for (const CLI::App* sub : app->get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_group().empty()) {
      continue; // hidden commands are not offered
    }
    out.push_back({sub->get_name(), sub->get_description()});
    for (const auto& alias : sub->get_aliases()) {
      out.push_back({alias, sub->get_description()});
    }
  }
  std::vector<const CLI::Option*> positional;
  for (const CLI::Option* opt : app->get_options()) {
    if (opt->get_positional()) {
      positional.push_back(opt);
    }
  }
  const CLI::Option* at = nullptr;
  if (given.size() < positional.size()) {
    at = positional[given.size()];
  } else if (!positional.empty() && positional.back()->get_items_expected_max() > 1) {
    at = positional.back();
  }
  if (at != nullptr && at->get_name() == "VALUE" && !given.empty()) {
    // config set KEY VALUE: the values of that key's flag (file names for a file's).
    std::string key = given.front();
    for (const auto& k : config_keys()) {
      if (k.name == given.front()) {
        key = k.flag.substr(2);
      }
    }
    if (key.ends_with("-file")) {
      out.push_back({k_files_marker, ""});
    }
    for (auto& v : fixed_values(key)) {
      out.push_back({v, ""});
    }
    if (key == "pool" && live) {
      for (auto& v : live(LiveKind::pools, "")) {
        out.push_back({v, ""});
      }
    }
  } else if (at != nullptr) {
    auto values = option_values(*app, *at, typed, subject, live);
    out.insert(out.end(), values.begin(), values.end());
  }
  return with_prefix(out, typed);
}

std::string bash_script() {
  return R"(# bash completion for tpuctl (generated by `tpuctl completion bash`; do not edit).
# Every answer comes from the binary itself (`tpuctl __complete`), so it always matches the
# commands, flags and store of the tpuctl on PATH. Needs the bash-completion package.
_tpuctl() {
  local cur words cword
  _get_comp_words_by_ref -n =: cur words cword 2>/dev/null || {
    cur=${COMP_WORDS[COMP_CWORD]}; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD
  }
  local IFS=$'\n'
  local -a candidates
  candidates=($("${words[0]}" __complete -- "${words[@]:1:cword}" 2>/dev/null))
  COMPREPLY=()
  local c
  # ":files" or ":dirs" first (TAB, then what precedes the path in the word): file names.
  if [[ ${candidates[0]} == :files* || ${candidates[0]} == :dirs* ]]; then
    local pre= kind=-f
    [[ ${candidates[0]} == *$'\t'* ]] && pre=${candidates[0]#*$'\t'}
    [[ ${candidates[0]} == :dirs* ]] && kind=-d
    for c in $(compgen $kind -- "${cur#"$pre"}"); do
      COMPREPLY+=("$pre$c")
    done
    compopt -o filenames 2>/dev/null
    candidates=("${candidates[@]:1}")
  fi
  for c in "${candidates[@]}"; do
    COMPREPLY+=("${c%%$'\t'*}")
  done
  [[ ${#COMPREPLY[@]} -eq 1 && ${COMPREPLY[0]} == *= ]] && compopt -o nospace 2>/dev/null
  # bash replaces only the text after the last '=' of the word (COMP_WORDBREAKS).
  if [[ $cur == *=* && $COMP_WORDBREAKS == *=* ]]; then
    local typed=${cur%=*}=
    COMPREPLY=("${COMPREPLY[@]#"$typed"}")
  fi
  __ltrim_colon_completions "$cur" 2>/dev/null
  return 0
}
complete -F _tpuctl tpuctl
)";
}

std::string zsh_script() {
  return R"(#compdef tpuctl
# zsh completion for tpuctl (generated by `tpuctl completion zsh`; do not edit).
# Every answer comes from the binary itself (`tpuctl __complete`), so it always matches the
# commands, flags and store of the tpuctl on PATH.
_tpuctl() {
  local -a lines values descriptions
  local line
  lines=("${(@f)$(${words[1]} __complete -- "${(@)words[2,CURRENT]}" 2>/dev/null)}")
  # ":files" or ":dirs" first (TAB, then what precedes the path in the word): file names.
  if [[ ${lines[1]} == :files* || ${lines[1]} == :dirs* ]]; then
    [[ ${lines[1]} == *$'\t'* ]] && compset -P '*='
    if [[ ${lines[1]} == :dirs* ]]; then _files -/; else _files; fi
    lines=("${(@)lines[2,-1]}")
    (( ${#lines} )) || return 0
  fi
  for line in "${lines[@]}"; do
    [[ -z $line ]] && continue
    values+=("${line%%$'\t'*}")
    if [[ $line == *$'\t'* ]]; then
      descriptions+=("${line%%$'\t'*} -- ${line#*$'\t'}")
    else
      descriptions+=("${line}")
    fi
  done
  (( ${#values} )) || return 1
  compadd -Q -l -d descriptions -a values
}
if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
  _tpuctl "$@"
else
  compdef _tpuctl tpuctl
fi
)";
}

} // namespace tpuctl::cli
