// ssh_config's CertificateFile, which libssh 0.10 ignores, read for the host as given: Host
// patterns with wildcards and negation, lines before any Host for every host, Match blocks not
// applied, `none` ignored, `~/` expanded, comments and `Keyword=value`.
#include <cstdlib>

#include <doctest/doctest.h>

#include "remote/ssh_config_certs.hpp"

using tpuctl::remote::certificate_files;

TEST_SUITE_BEGIN("remote");

TEST_CASE("remote::certificate_files gives a host the CertificateFile lines of its Host blocks") {
  const std::string home = std::getenv("HOME") ? std::getenv("HOME") : "";
  const std::string config = "# global\n"
                             "CertificateFile /etc/all-cert.pub\n"
                             "Host *.pod !bad.pod\n"
                             "  IdentityFile ~/.ssh/pod\n"
                             "  CertificateFile ~/.ssh/pod-cert.pub   # the fleet's\n"
                             "Host bastion\n"
                             "\tCertificateFile=/b/bastion-cert.pub\n"
                             "Match user root\n"
                             "  CertificateFile /m/never-cert.pub\n"
                             "Host *\n"
                             "  CERTIFICATEFILE none\n";
  CHECK(certificate_files(config, "w1.pod") ==
        std::vector<std::string>{"/etc/all-cert.pub", home + "/.ssh/pod-cert.pub"});
  CHECK(certificate_files(config, "bad.pod") == std::vector<std::string>{"/etc/all-cert.pub"});
  CHECK(certificate_files(config, "bastion") ==
        std::vector<std::string>{"/etc/all-cert.pub", "/b/bastion-cert.pub"});
  CHECK(certificate_files(config, "other") == std::vector<std::string>{"/etc/all-cert.pub"});
  CHECK(certificate_files("", "w1.pod").empty());
}
