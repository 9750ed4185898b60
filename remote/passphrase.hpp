// Passphrases of encrypted identity files, asked the ways OpenSSH asks them (remote/ssh_types.hpp
// PassphraseSource): from --identity-passphrase-file (its first line), else from SSH_ASKPASS
// (when SSH_ASKPASS_REQUIRE is force or prefer, or when there is a display and no terminal, as
// ssh(1) does; never with SSH_ASKPASS_REQUIRE=never), else from a prompt on the controlling
// terminal with echo off when stdin is a terminal. In batch mode (none of those) a key that needs a
// passphrase fails at once, naming the file and these ways out; an encrypted key ssh-agent holds
// needs none of them (remote/ tries the agent for it). Each file is asked once per process.
#pragma once

#include <string>

#include "remote/ssh_types.hpp"

namespace tpuctl::remote {

remote::PassphraseSource passphrase_source(const std::string& passphrase_file);

} // namespace tpuctl::remote
