// doctest's main for tpuctl_tests. Run one file's tests with --source-file=*tests/unit/...;
// CTest does that for every file (tests/CMakeLists.txt).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
