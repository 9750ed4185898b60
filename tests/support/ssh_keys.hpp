// ssh-keygen for the tests that make keys, certificates and CAs (`ssh-keygen -s`).
#pragma once

#include <string>
#include <vector>

namespace tpuctl::test {

// Runs `ssh-keygen -q ARGS...`; fails the test (REQUIRE) when it cannot run or exits non-zero,
// with its stderr.
void ssh_keygen(const std::vector<std::string>& args);

// "TYPE BASE64" of a public key (or certificate) file, as a known_hosts line takes it.
std::string key_fields(const std::string& pub_path);

} // namespace tpuctl::test
