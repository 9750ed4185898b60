#include "cli/completion.hpp"

#include <algorithm>
#include <optional>

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
  if (name == "pool" || (group == "pool" && name == "NAME")) {
    return LiveKind::pools;
  }
  if (name == "cluster" || (group == "cluster" && name == "NAME")) {
    return LiveKind::clusters;
  }
  if (group == "workload" && name == "W") {
    return LiveKind::workloads;
  }
  if (name == "QR_ID") {
    return LiveKind::queued_resources;
  }
  if (name == "TARGET" || name == "NODE" || name == "NODE_ID") {
    return LiveKind::nodes;
  }
  if (name == "HOST" || name == "HOSTS") {
    return LiveKind::hosts;
  }
  return std::nullopt;
}

// The values for the option `opt` (fixed first, else live).
std::vector<Candidate> option_values(const CLI::App& app, const CLI::Option& opt,
                                     const LiveValues& live) {
  std::vector<Candidate> out;
  const std::string name = opt.get_lnames().empty() ? opt.get_name() : opt.get_lnames().front();
  for (auto& v : fixed_values(name)) {
    out.push_back({v, ""});
  }
  if (out.empty()) {
    if (auto kind = live_kind(app, name); kind && live) {
      for (auto& v : live(*kind)) {
        out.push_back({v, ""});
      }
    }
  }
  return out;
}

std::vector<Candidate> with_prefix(std::vector<Candidate> all, const std::string& typed,
                                   const std::string& prepend = "") {
  std::vector<Candidate> out;
  for (auto& c : all) {
    std::string value = prepend + c.value;
    if (util::starts_with(value, typed)) {
      out.push_back({value, c.description});
    }
  }
  return out;
}

} // namespace

std::vector<std::string> fixed_values(std::string_view name) {
  if (name == "format") {
    return {"table", "json", "yaml"};
  }
  if (name == "verbosity") {
    return {"debug", "info", "warning", "error", "none"};
  }
  if (name == "generation" || name == "type") {
    std::vector<std::string> out;
    for (const auto& g : topology::generations()) {
      out.emplace_back(g.name);
    }
    return out;
  }
  if (name == "accelerator-type" || name == "tpu-type") {
    std::vector<std::string> out;
    for (const auto& t : topology::catalogue()) {
      out.push_back(t.name);
    }
    return out;
  }
  if (name == "dataflow") {
    return {"ws", "os", "is"};
  }
  if (name == "dtype") {
    return {"int8", "bf16", "fp32"};
  }
  if (name == "worker") {
    return {"all"};
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
  if (name == "provisioning-model") {
    return {"standard", "spot", "flex-start"};
  }
  return {};
}

std::vector<Candidate> complete(const CLI::App& root, const std::vector<std::string>& words,
                                const LiveValues& live) {
  const std::string typed = words.empty() ? "" : words.back();
  const CLI::App* app = &root;
  const CLI::Option* pending = nullptr; // a flag whose value comes next
  size_t positionals = 0;
  bool options_ended = false;
  for (size_t i = 0; i + 1 < words.size(); ++i) {
    const std::string& w = words[i];
    if (pending) {
      pending = nullptr;
      continue;
    }
    if (options_ended) {
      ++positionals;
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
      }
      continue;
    }
    if (const CLI::App* sub = find_subcommand(*app, w)) {
      app = sub;
      positionals = 0;
      continue;
    }
    ++positionals;
  }
  if (pending) {
    return with_prefix(option_values(*app, *pending, live), typed);
  }
  if (util::starts_with(typed, "--") && typed.find('=') != std::string::npos) {
    const std::string flag = typed.substr(0, typed.find('='));
    const CLI::Option* opt = find_option(*app, flag);
    return opt ? with_prefix(option_values(*app, *opt, live), typed, flag + "=")
               : std::vector<Candidate>{};
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
  if (positionals < positional.size()) {
    const CLI::Option* opt = positional[positionals];
    if (auto kind = live_kind(*app, opt->get_name()); kind && live) {
      for (auto& v : live(*kind)) {
        out.push_back({v, ""});
      }
    }
  } else if (!positional.empty() && positional.back()->get_items_expected_max() > 1) {
    if (auto kind = live_kind(*app, positional.back()->get_name()); kind && live) {
      for (auto& v : live(*kind)) {
        out.push_back({v, ""});
      }
    }
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
