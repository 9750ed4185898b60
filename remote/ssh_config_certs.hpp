// The `CertificateFile` keyword of ssh_config, which libssh 0.10 parses as unsupported and
// ignores: tpuctl reads it itself, for the identity files it loads (ssh_connect.cpp), from the
// same file libssh reads (~/.ssh/config, or --ssh-config).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tpuctl::remote {

// The CertificateFile values `config` (an ssh_config's text) gives the host named `host` (the
// name as given, which `Host` patterns are matched against), in order, `~/` expanded. Lines
// before the first Host or Match apply to every host; `Host` takes OpenSSH patterns (`*`, `?`,
// a negated `!pattern` excludes); lines under a `Match` block are not applied (tpuctl does not
// evaluate Match criteria); `Include` is not followed.
std::vector<std::string> certificate_files(std::string_view config, const std::string& host);

// certificate_files() of the file at `path` ("" for ~/.ssh/config); none when it is unreadable.
std::vector<std::string> certificate_files_of(const std::string& path, const std::string& host);

} // namespace tpuctl::remote
