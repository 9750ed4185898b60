#include "remote/ssh_settings.hpp"

#include "remote/passphrase.hpp"
#include "util/strings.hpp"

namespace tpuctl::remote {

Expected<HostKeyPolicy> parse_host_key_policy(const std::string& text) {
  const std::string policy = util::to_lower(text);
  if (policy == "yes" || policy == "ask") {
    return HostKeyPolicy::yes;
  }
  if (policy == "accept-new") {
    return HostKeyPolicy::accept_new;
  }
  if (policy == "no") {
    return HostKeyPolicy::no;
  }
  return usage_error("--strict-host-key-checking: '" + util::printable(text) +
                     "' is not a policy (use yes, accept-new or no; ask is yes)");
}

Expected<SshOptions> with_settings(SshOptions base, const SshSettings& settings) {
  if (!settings.strict.empty()) {
    TPUCTL_TRY_ASSIGN(base.host_key_policy, parse_host_key_policy(settings.strict));
  }
  if (!settings.config_file.empty()) {
    base.config_file = settings.config_file;
  }
  if (!settings.passphrase_file.empty()) {
    base.passphrase_source = passphrase_source(settings.passphrase_file);
    // Keys tpuctl does not load itself (an ssh_config's IdentityFile, the default keys) are
    // decrypted by libssh's own key loop, which takes one passphrase: the file's, read here
    // once. A file that cannot be read leaves it unset; loading a key that needs it says why.
    if (auto pass = base.passphrase_source(settings.passphrase_file)) {
      base.identity_passphrase = *pass;
    }
  }
  if (settings.connect_timeout_ms > 0) {
    base.connect_timeout = std::chrono::milliseconds(settings.connect_timeout_ms);
  }
  return base;
}

} // namespace tpuctl::remote
