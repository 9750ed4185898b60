// tpuctl config set|get|unset|list: the defaults in $XDG_CONFIG_HOME/tpuctl/config.json
// (cli/config.hpp). A flag beats its environment variable, which beats the config file.
#include <algorithm>

#include "cli/commands.hpp"
#include "cli/config.hpp"
#include "cli/output.hpp"

namespace tpuctl::cli {

namespace {

struct ConfigFlags {
  std::string key;
  std::string value;
};

Expected<Config> current() {
  return Config::load(config_path());
}

} // namespace

void setup_config(CLI::App& group, Registry& registry) {
  auto f = std::make_shared<ConfigFlags>();
  CLI::App* set = registry.add(
      group, "set", "set a default (checked like its flag)", [f](Context& ctx) -> Expected<int> {
        TPUCTL_TRY_ASSIGN(Config c, current());
        f->key = canonical_config_key(f->key);
        if (auto why = ignored_config_key(f->key); !why.empty()) {
          if (!ctx.globals.quiet) {
            *ctx.err << "tpuctl: notice: config " << f->key << " ignored: " << why << "\n";
          }
          TPUCTL_TRY(emit(ctx, Json{{"key", f->key}, {"ignored", true}},
                          [](std::ostream&, const Json&) {}));
          return 0;
        }
        TPUCTL_TRY(c.set(f->key, f->value));
        TPUCTL_TRY(c.save());
        TPUCTL_TRY(emit(ctx, Json{{"key", f->key}, {"value", f->value}},
                        [&](std::ostream& os, const Json&) {
                          os << "set " << f->key << " = " << f->value << " in " << c.path() << "\n";
                        }));
        return 0;
      });
  set->add_option("KEY", f->key, "a key (see 'tpuctl config list')")->required();
  set->add_option("VALUE", f->value, "its value")->required();

  auto g = std::make_shared<ConfigFlags>();
  CLI::App* get =
      registry.add(group, "get", "print a default (exit 4 when it is not set)",
                   [g](Context& ctx) -> Expected<int> {
                     TPUCTL_TRY_ASSIGN(Config c, current());
                     g->key = canonical_config_key(g->key);
                     TPUCTL_TRY(Config().unset(g->key)); // a known key
                     auto v = c.get(g->key);
                     if (!v) {
                       return Error(ErrorKind::not_found, "config " + g->key +
                                                              " is not set (set it with "
                                                              "'tpuctl config set " +
                                                              g->key + " VALUE')");
                     }
                     TPUCTL_TRY(emit(ctx, Json{{"key", g->key}, {"value", *v}},
                                     [&](std::ostream& os, const Json&) { os << *v << "\n"; }));
                     return 0;
                   });
  get->add_option("KEY", g->key, "a key")->required();

  auto u = std::make_shared<std::vector<std::string>>();
  CLI::App* unset = registry.add(
      group, "unset", "remove defaults (each KEY given)", [u](Context& ctx) -> Expected<int> {
        TPUCTL_TRY_ASSIGN(Config c, current());
        // Every key is checked before the file changes: one unknown key changes nothing.
        ErrorList problems;
        std::vector<std::string> keys;
        for (const auto& given : *u) {
          std::string key = canonical_config_key(given);
          if (auto r = c.unset(key); !r) {
            problems.add(r.error());
          } else if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
            keys.push_back(key);
          }
        }
        if (!problems.empty()) {
          return problems.combined();
        }
        TPUCTL_TRY(c.save());
        Json out = Json::array();
        for (const auto& key : keys) {
          out.push_back(Json{{"key", key}, {"unset", true}});
        }
        TPUCTL_TRY(emit(ctx, keys.size() == 1 ? out[0] : out,
                        [&](std::ostream& os, const Json&) {
                          for (const auto& key : keys) {
                            os << "unset " << key << "\n";
                          }
                        }));
        return 0;
      });
  unset->add_option("KEY", *u, "a key, or several")->required();

  registry.add(
      group, "list", "every key: its value (or unset) and what it is the default of",
      [](Context& ctx) -> Expected<int> {
        TPUCTL_TRY_ASSIGN(Config c, current());
        Json rows = Json::array();
        for (const auto& k : config_keys()) {
          rows.push_back(Json{{"key", k.name},
                              {"value", c.get(k.name).value_or("")},
                              {"flag", k.flag},
                              {"help", k.help}});
        }
        TPUCTL_TRY(emit_list(ctx, rows, {{"key", "key"}, {"value", "value"}, {"flag", "flag"}}));
        return 0;
      });
  group.footer("Stored in $XDG_CONFIG_HOME/tpuctl/config.json (else ~/.config/tpuctl/), 0600.\n"
               "A flag beats its environment variable (TPUCTL_STATE, TPUCTL_POOL), which beats\n"
               "the config file, which beats the built-in default.\n\nExamples:\n"
               "  tpuctl config set pool team-a\n"
               "  tpuctl config set state etcd://10.0.0.5:2379\n"
               "  tpuctl config set ssh.batch_size 128");
}

} // namespace tpuctl::cli
