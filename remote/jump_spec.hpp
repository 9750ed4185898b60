// Jump hosts as users write them (OpenSSH's ProxyJump / -J): a comma list of
// `[user@]host[:port]` hops, the first reached directly and each next one through the one before,
// or `none`. Pure: parsing and printing only. remote/jump_hub.hpp does the connecting.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/expected.hpp"

namespace tpuctl::remote {

struct JumpHop {
  std::string user;  // empty: ssh_config's User for the host, else the local user
  std::string host;  // a validated name or address (IPv6 without brackets)
  uint16_t port = 0; // 0: ssh_config's Port for the host, else 22
};

// Parses `[user@]host[:port][,[user@]host[:port]...]` (IPv6 as `[::1]:22`), or `none` (no hops:
// an empty list). Errors (usage), one line starting with `what` (the flag or field the value came
// from), naming the value, what is wrong in it and the form to use.
Expected<std::vector<JumpHop>> parse_jump_spec(std::string_view spec,
                                               std::string_view what = "--proxy-jump");

// The hops as parse_jump_spec reads them back ("u@b1:2222,b2"; "none" for no hops).
std::string to_string(const std::vector<JumpHop>& hops);
std::string to_string(const JumpHop& hop);

// libssh 0.10 turns an ssh_config `ProxyJump a,b` into `ProxyCommand ssh [-l U] [-p P] [-J b]
// -W '[%h]:%p' a`, which would run one `ssh` per host outside tpuctl's host-key policy. This
// gives the ProxyJump value back from such a command (nullopt for any other command), so that
// tpuctl makes the jump itself.
std::optional<std::string> jump_from_proxy_command(std::string_view command);

} // namespace tpuctl::remote
