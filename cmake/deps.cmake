# All dependencies come from Debian's packages (scripts/deps.sh installs them).
find_package(Threads REQUIRED)
find_package(CLI11 CONFIG REQUIRED)          # libcli11-dev
find_package(nlohmann_json CONFIG REQUIRED)  # nlohmann-json3-dev
find_package(spdlog CONFIG REQUIRED)         # libspdlog-dev
if(TPUCTL_BUILD_TESTS)
  find_package(doctest CONFIG REQUIRED)      # doctest-dev
endif()
