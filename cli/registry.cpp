#include "cli/registry.hpp"

namespace tpuctl::cli {

CLI::App* Registry::add(CLI::App& parent, const std::string& name, const std::string& summary,
                        Runner run) {
  CLI::App* sub = parent.add_subcommand(name, summary);
  m_runners[sub] = std::move(run);
  return sub;
}

void Registry::bind(CLI::App& app, Runner run) {
  m_runners[&app] = std::move(run);
}

const CLI::App& deepest_parsed(const CLI::App& root) {
  const CLI::App* cur = &root;
  while (true) {
    const CLI::App* next = nullptr;
    for (const CLI::App* sub : cur->get_subcommands([](const CLI::App*) { return true; })) {
      if (sub->parsed()) {
        next = sub;
        break;
      }
    }
    if (!next) {
      return *cur;
    }
    cur = next;
  }
}

const Runner* Registry::find(const CLI::App& root) const {
  auto it = m_runners.find(&deepest_parsed(root));
  return it == m_runners.end() ? nullptr : &it->second;
}

std::string command_path(const CLI::App& app) {
  std::string path = app.get_name();
  for (const CLI::App* p = app.get_parent(); p; p = p->get_parent()) {
    path = p->get_name() + " " + path;
  }
  return path;
}

} // namespace tpuctl::cli
