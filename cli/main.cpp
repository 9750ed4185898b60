#include <iostream>

#include "cli/app.hpp"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  return tpuctl::cli::run(args, std::cout, std::cerr);
}
