# Warnings are errors nowhere (Debian's compilers change), but the tree is kept clean.
function(tpuctl_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow
                                           -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
                                           -Woverloaded-virtual -Wformat=2 -Wimplicit-fallthrough)
endfunction()
