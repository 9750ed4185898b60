# Bakes the version, git commit, build type and compiler into util/build_info.
execute_process(COMMAND git rev-parse --short=12 HEAD
                WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                OUTPUT_VARIABLE TPUCTL_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE
                ERROR_QUIET RESULT_VARIABLE _git_rc)
if(NOT _git_rc EQUAL 0 OR TPUCTL_GIT_COMMIT STREQUAL "")
  set(TPUCTL_GIT_COMMIT "unknown")
endif()
set(TPUCTL_COMPILER "${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}")
configure_file(${PROJECT_SOURCE_DIR}/util/build_info.hpp.in
               ${PROJECT_BINARY_DIR}/generated/util/build_info.hpp @ONLY)
