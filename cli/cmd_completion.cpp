// tpuctl completion bash|zsh, and the hidden `tpuctl __complete -- WORDS...` the scripts call.
// Live values come straight from the store (no reconciliation, no drivers): completion must be
// fast and must never change anything.
#include <algorithm>
#include <cstdlib>
#include <optional>

#include "cli/commands.hpp"
#include "cli/completion.hpp"
#include "cli/output.hpp"
#include "provision/pool/pools.hpp"
#include "provision/queue/queued_resource.hpp"
#include "provision/workload/cluster.hpp"
#include "provision/workload/workload.hpp"
#include "state/location.hpp"
#include "util/strings.hpp"

namespace tpuctl::cli {

namespace {

// The value of global flag `flag` among `words` ("--flag V" or "--flag=V"), else $env.
std::string global_value(const std::vector<std::string>& words, const std::string& flag,
                         const char* env) {
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i] == flag && i + 1 < words.size()) {
      return words[i + 1];
    }
    if (util::starts_with(words[i], flag + "=")) {
      return words[i].substr(flag.size() + 1);
    }
  }
  const char* v = std::getenv(env);
  return v ? v : "";
}

// The queued resource `subject` names: itself, one of its nodes, or a workload's (or cluster's)
// request. nullopt when none.
std::optional<provision::TargetNodes> subject_target(state::StateStore& s, const std::string& pool,
                                                     const std::string& subject) {
  if (subject.empty()) {
    return std::nullopt;
  }
  if (auto t = provision::resolve_target(s, pool, subject)) {
    return *t;
  }
  if (auto w = provision::load_workload(s, pool, subject)) {
    if (auto t = provision::resolve_target(s, pool, w->queued_resource)) {
      return *t;
    }
  }
  return std::nullopt;
}

std::vector<std::string> live_values(const std::vector<std::string>& words, LiveKind kind,
                                     const std::string& subject) {
  std::vector<std::string> out;
  auto store = state::open_store(global_value(words, "--state", "TPUCTL_STATE"));
  if (!store) {
    return out;
  }
  state::StateStore& s = **store;
  if (kind == LiveKind::pools) {
    if (auto pools = provision::list_pools(s)) {
      for (const auto& p : *pools) {
        out.push_back(p.name);
      }
    }
    return out;
  }
  auto pool = provision::resolve_pool_name(s, global_value(words, "--pool", "TPUCTL_POOL"));
  if (!pool) {
    return out;
  }
  switch (kind) {
  case LiveKind::hosts:
    if (auto view = provision::load_pool(s, *pool)) {
      for (const auto& h : view->hosts) {
        out.push_back(h.name);
      }
    }
    break;
  case LiveKind::node_ids:
    if (auto all = provision::list_queued_resources(s, *pool)) {
      for (const auto& q : *all) {
        out.insert(out.end(), q.node_ids.begin(), q.node_ids.end());
      }
    }
    break;
  case LiveKind::queued_resources:
  case LiveKind::nodes:
    if (auto all = provision::list_queued_resources(s, *pool)) {
      for (const auto& q : *all) {
        out.push_back(q.id);
        if (kind == LiveKind::nodes) {
          for (const auto& n : q.node_ids) {
            if (n != q.id) {
              out.push_back(n);
            }
          }
        }
      }
    }
    break;
  case LiveKind::clusters:
    if (auto all = provision::list_clusters(s, *pool)) {
      for (const auto& c : *all) {
        out.push_back(c.name);
      }
    }
    break;
  case LiveKind::workloads:
    if (auto all = provision::list_workloads(s, *pool)) {
      for (const auto& w : *all) {
        out.push_back(w.name);
      }
    }
    break;
  case LiveKind::subject_nodes:
    if (auto t = subject_target(s, *pool, subject)) {
      // gcloud's indices first, then the node ids.
      for (size_t i = 0; i < t->qr.node_ids.size(); ++i) {
        out.push_back(std::to_string(i));
      }
      out.insert(out.end(), t->qr.node_ids.begin(), t->qr.node_ids.end());
      out.push_back("all");
    }
    break;
  case LiveKind::subject_workers:
    if (auto t = subject_target(s, *pool, subject)) {
      size_t workers = 0;
      for (const auto& n : t->qr.nodes) {
        workers = std::max(workers, n.workers.size());
      }
      for (size_t w = 0; w < workers; ++w) {
        out.push_back(std::to_string(w));
      }
      if (workers > 1) {
        out.push_back("0-" + std::to_string(workers - 1));
      }
    }
    break;
  case LiveKind::pools:
    break;
  }
  return out;
}

} // namespace

int run_complete(const CLI::App& root, const std::vector<std::string>& args, std::ostream& out) {
  // args: tpuctl __complete [--] WORDS...
  std::vector<std::string> words;
  size_t i = 2;
  if (i < args.size() && args[i] == "--") {
    ++i;
  }
  words.assign(args.begin() + static_cast<std::ptrdiff_t>(std::min(i, args.size())), args.end());
  if (words.empty()) {
    words.push_back("");
  }
  auto candidates = complete(root, words, [&](LiveKind kind, const std::string& subject) {
    return live_values(words, kind, subject);
  });
  for (const auto& c : candidates) {
    out << c.value;
    if (!c.description.empty()) {
      out << '\t' << c.description;
    }
    out << '\n';
  }
  return 0;
}

void setup_completion(CLI::App& group, Registry& registry) {
  registry.add(group, "bash", "print the bash completion script (needs bash-completion)",
               [](Context& ctx) -> Expected<int> {
                 *ctx.out << bash_script();
                 return 0;
               });
  registry.add(group, "zsh", "print the zsh completion script (save it as _tpuctl on $fpath)",
               [](Context& ctx) -> Expected<int> {
                 *ctx.out << zsh_script();
                 return 0;
               });
  group.footer(
      "Set-up:\n"
      "  bash: tpuctl completion bash > ~/.local/share/bash-completion/completions/tpuctl\n"
      "  zsh:  tpuctl completion zsh > \"${fpath[1]}/_tpuctl\"   (then: compinit)\n"
      "Packages install both (completions/tpuctl.bash, completions/_tpuctl).");
}

} // namespace tpuctl::cli
