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

# Configure again when the checkout moves to another commit (a commit, a checkout), so an
# incremental build never bakes in a stale one. (A worktree's .git is a file: not followed.)
set(_git_dir ${PROJECT_SOURCE_DIR}/.git)
if(EXISTS ${_git_dir}/HEAD)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_git_dir}/HEAD)
  file(READ ${_git_dir}/HEAD _git_head)
  if(_git_head MATCHES "^ref: ([^\n]+)" AND EXISTS ${_git_dir}/${CMAKE_MATCH_1})
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_git_dir}/${CMAKE_MATCH_1})
  endif()
  if(EXISTS ${_git_dir}/packed-refs)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_git_dir}/packed-refs)
  endif()
endif()
