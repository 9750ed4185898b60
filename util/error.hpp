// Errors are values inside tpuctl: every fallible function returns Expected<T> (expected.hpp)
// carrying an Error. Only cli/ turns an Error into the `tpuctl: error: ...` line and an exit code.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tpuctl {

// What kind of failure this is; cli/ maps each kind to one documented exit status.
enum class ErrorKind {
  failure,     // anything else that went wrong (exit 1)
  usage,       // invalid input: a bad flag value, a malformed topology (exit 2)
  capacity,    // no capacity for the request, or timed out waiting (exit 3)
  not_found,   // a named object does not exist (exit 4)
  auth,        // authentication or host-key failure (exit 5)
  timeout,     // a remote command ran past its timeout (exit 124)
  interrupted, // SIGINT / SIGTERM (exit 130)
  // The command recorded what it was asked to create (a queued resource, ...), which now
  // exists, and then could not carry on (the state store became unwritable, ...): the message
  // names what exists and its state (exit 6).
  partial,
};

// One failure. `message` is lowercase, names the offending value and says how to fix it, e.g.
// "accelerator type 'v5p-7' is not valid: the number must be one of 8, 16, 32, ...".
// `problems` holds further independent problems found in the same request, so a user sees every
// mistake at once rather than one per run.
struct Error {
  ErrorKind kind = ErrorKind::failure;
  std::string message;
  std::vector<std::string> more;
  // A stable machine-readable code for callers that must tell failures of one kind apart, e.g.
  // "conflict" (a compare-and-swap lost), "hosts_busy", "already_exists", "unavailable".
  // Empty when nobody needs to branch on it. Never shown to users on its own.
  std::string reason;

  Error() = default;
  Error(ErrorKind k, std::string msg) : kind(k), message(std::move(msg)) {}
  Error(ErrorKind k, std::string msg, std::string_view why)
      : kind(k), message(std::move(msg)), reason(why) {}

  // Adds `other`'s messages to this error (used to report every problem in a request).
  void absorb(const Error& other);
  // All messages, the first one first.
  std::vector<std::string> all_messages() const;
};

Error make_error(ErrorKind kind, std::string message);
inline Error usage_error(std::string message) {
  return {ErrorKind::usage, std::move(message)};
}
inline Error not_found_error(std::string message) {
  return {ErrorKind::not_found, std::move(message)};
}

// Collects independent validation problems and yields one Error holding them all (mold's
// "checkpoint": report everything, then stop).
class ErrorList {
public:
  void add(Error e);
  void add(ErrorKind kind, std::string message) { add(Error{kind, std::move(message)}); }
  bool empty() const { return m_errors.empty(); }
  // The combined error; its kind is the first problem's kind. Precondition: !empty().
  Error combined() const;

private:
  std::vector<Error> m_errors;
};

std::string_view to_string(ErrorKind kind);

} // namespace tpuctl
