#include <iostream>
#include <sys/resource.h>

#include "cli/app.hpp"

namespace {

// A fan-out or a provisioning holds one socket per host at once (2,304 for a tpu7x pod), more
// than the soft limit of 1024 open files most systems start a login with. Raise the soft limit to
// the hard one, as Go's runtime does: nothing here uses select(), so high descriptors are safe.
void raise_open_file_limit() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &lim);
  }
}

} // namespace

int main(int argc, char** argv) {
  raise_open_file_limit();
  std::vector<std::string> args(argv, argv + argc);
  return tpuctl::cli::run(args, std::cout, std::cerr);
}
