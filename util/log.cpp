#include "util/log.hpp"

#include <filesystem>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "util/private_files.hpp"

namespace tpuctl::util {

Expected<Verbosity> parse_verbosity(const std::string& text) {
  if (text == "debug") {
    return Verbosity::debug;
  }
  if (text == "info") {
    return Verbosity::info;
  }
  if (text == "warning") {
    return Verbosity::warning;
  }
  if (text == "error" || text == "critical") { // critical: gcloud's; tpuctl logs no level above
    return Verbosity::error;
  }
  if (text == "none") {
    return Verbosity::none;
  }
  return usage_error("--verbosity: '" + text +
                     "' is not a level (use debug, info, warning, error or none)");
}

static spdlog::level::level_enum to_spdlog(Verbosity v) {
  switch (v) {
  case Verbosity::debug:
    return spdlog::level::debug;
  case Verbosity::info:
    return spdlog::level::info;
  case Verbosity::warning:
    return spdlog::level::warn;
  case Verbosity::error:
    return spdlog::level::err;
  case Verbosity::none:
    return spdlog::level::off;
  }
  return spdlog::level::warn;
}

Status init_logging(Verbosity level, const std::string& log_file) {
  std::shared_ptr<spdlog::logger> logger;
  if (!log_file.empty()) {
    // spdlog would create missing directories; a typo in the path should be an error instead.
    std::filesystem::path parent = std::filesystem::absolute(log_file).parent_path();
    std::error_code ec;
    if (!std::filesystem::is_directory(parent, ec)) {
      return make_error(ErrorKind::failure,
                        "--log-file: cannot open '" + log_file + "': directory '" +
                            parent.string() +
                            "' does not exist (create it or choose another path)");
    }
    // Created 0600: a log is the user's own business (SECURITY.md).
    if (auto created = create_private_file(log_file); !created) {
      return make_error(ErrorKind::failure,
                        "--log-file: " + created.error().message + " (choose a writable path)");
    }
  }
  try {
    if (log_file.empty()) {
      logger = std::make_shared<spdlog::logger>("tpuctl",
                                                std::make_shared<spdlog::sinks::stderr_sink_mt>());
      logger->set_pattern("tpuctl: %l: %v");
    } else {
      logger = std::make_shared<spdlog::logger>(
          "tpuctl", std::make_shared<spdlog::sinks::basic_file_sink_mt>(log_file, false));
      logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %l [%t] %v");
    }
  } catch (const spdlog::spdlog_ex& e) {
    return make_error(ErrorKind::failure, "--log-file: cannot open '" + log_file +
                                              "': " + e.what() + " (choose a writable path)");
  }
  logger->set_level(to_spdlog(level));
  logger->flush_on(spdlog::level::debug);
  spdlog::set_default_logger(logger);
  return ok();
}

} // namespace tpuctl::util
