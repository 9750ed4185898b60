# Sanitizer and fuzzing builds. Each is its own build directory (scripts/build.sh picks it):
#   -DTPUCTL_SANITIZE=ON    AddressSanitizer + UndefinedBehaviorSanitizer on everything
#                           (build-sanitize/, `scripts/test.sh --sanitize`)
#   -DTPUCTL_TSAN=ON        ThreadSanitizer on everything (build-tsan/, `scripts/test.sh --tsan`)
#   -DTPUCTL_BUILD_FUZZ=ON  the libFuzzer targets in fuzz/; clang only, every library built with
#                           -fsanitize=fuzzer-no-link,address,undefined (build-fuzz/,
#                           bench/fuzz.sh)
if(TPUCTL_SANITIZE AND TPUCTL_TSAN)
  message(FATAL_ERROR "TPUCTL_SANITIZE and TPUCTL_TSAN cannot be combined: "
                      "ThreadSanitizer and AddressSanitizer exclude each other")
endif()

# Sanitizer builds compile at -O1 with line tables only (-g1), after the build type's flags so
# they win: what the sanitizers' docs recommend for useful speed and stacks, and half the
# compile time of -O2 -g (36 s -> 16 s for a large test file under ASan), which is what keeps
# CI's sanitizer pass inside its time.
if(TPUCTL_SANITIZE)
  add_compile_options(-O1 -g1 -fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

if(TPUCTL_TSAN)
  add_compile_options(-O1 -g1 -fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
endif()

if(TPUCTL_BUILD_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "TPUCTL_BUILD_FUZZ needs clang (libFuzzer): configure with "
                        "-DCMAKE_CXX_COMPILER=clang++ (Debian packages clang, libclang-rt-14-dev)")
  endif()
  if(TPUCTL_SANITIZE OR TPUCTL_TSAN)
    message(FATAL_ERROR "TPUCTL_BUILD_FUZZ already builds with ASan + UBSan; drop the other "
                        "sanitizer option")
  endif()
  # Coverage hooks for libFuzzer in every library; the fuzz targets themselves link the fuzzer's
  # main with -fsanitize=fuzzer (fuzz/CMakeLists.txt).
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
