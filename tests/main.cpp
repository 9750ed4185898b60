// doctest's main for tpuctl_tests. Run one file's tests with --source-file=*tests/unit/...;
// CTest does that for every file (tests/CMakeLists.txt).
//
// Logging is set up before any test starts a thread, as tpuctl's own main does: spdlog's
// registry is created on first use inside libspdlog (not instrumented), so a first use from two
// test threads at once is reported by ThreadSanitizer as a race on the logger's level.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <spdlog/spdlog.h>

int main(int argc, char** argv) {
  (void)spdlog::default_logger();
  doctest::Context context(argc, argv);
  return context.run();
}
