#include "tests/support/helpers.hpp"

#include <arpa/inet.h>
#include <cstdlib>
#include <fstream>
#include <netinet/in.h>
#include <sstream>
#include <sys/socket.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include "cli/app.hpp"

namespace tpuctl::test {

std::string source_dir() {
  return TPUCTL_SOURCE_DIR;
}
std::string tpuctl_binary() {
  return TPUCTL_BINARY;
}

util::ProcessResult run_tpuctl(const std::vector<std::string>& args,
                               const std::map<std::string, std::string>& env,
                               const std::string& stdin_data) {
  std::vector<std::string> argv{tpuctl_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  util::ProcessOptions opt;
  opt.env_set = env;
  opt.env_unset = {"TPUCTL_STATE", "TPUCTL_POOL", "NO_COLOR"};
  opt.stdin_data = stdin_data;
  opt.timeout = std::chrono::minutes(10);
  auto r = util::run_process(argv, opt);
  if (!r) {
    util::ProcessResult failed;
    failed.err = r.error().message;
    return failed;
  }
  return *r;
}

InProcessResult run_cli(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  std::vector<std::string> full{"tpuctl"};
  full.insert(full.end(), args.begin(), args.end());
  int code = cli::run(full, out, err);
  return {code, out.str(), err.str()};
}

TempDir::TempDir() {
  std::string base = std::filesystem::temp_directory_path() / "tpuctl-test-XXXXXX";
  std::vector<char> buf(base.begin(), base.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data())) {
    throw std::runtime_error("mkdtemp failed");
  }
  m_path = buf.data();
}

TempDir::~TempDir() {
  const char* keep = std::getenv("TPUCTL_KEEP_TMP");
  if (keep && std::string(keep) == "1") {
    return;
  }
  std::error_code ec;
  std::filesystem::remove_all(m_path, ec);
}

std::string check_golden(const std::string& name, const std::string& actual) {
  std::filesystem::path file = std::filesystem::path(source_dir()) / "tests" / "golden" / name;
  const char* update = std::getenv("TPUCTL_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << actual;
    return "";
  }
  std::ifstream in(file);
  if (!in) {
    return "golden file " + file.string() +
           " is missing (run the tests with TPUCTL_UPDATE_GOLDEN=1 to create it)";
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string expected = ss.str();
  if (expected == actual) {
    return "";
  }
  std::istringstream e(expected), a(actual);
  std::string le, la;
  int line = 1;
  while (true) {
    bool ge = static_cast<bool>(std::getline(e, le));
    bool ga = static_cast<bool>(std::getline(a, la));
    if (!ge && !ga) {
      break;
    }
    if (le != la || ge != ga) {
      return file.string() + " differs at line " + std::to_string(line) +
             ":\n  expected: " + (ge ? le : "<end>") + "\n  actual:   " + (ga ? la : "<end>") +
             "\n(if the change is intended, rerun with TPUCTL_UPDATE_GOLDEN=1)";
    }
    ++line;
  }
  return file.string() + " differs (line endings?)";
}

bool can_bind(const std::string& address, uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return false;
  }
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  ::inet_pton(AF_INET, address.c_str(), &sa.sin_addr);
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  ::close(fd);
  return ok;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return true;
}

unsigned file_mode(const std::filesystem::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? (st.st_mode & 07777u) : 0u;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace tpuctl::test
