// Expected<T>: a value or an Error (C++23's std::expected, reduced to what tpuctl needs).
//
//   Expected<int> parse_port(std::string_view s);
//   TPUCTL_TRY_ASSIGN(auto port, parse_port(text));   // returns the Error to the caller
//   TPUCTL_TRY(store.put(record));                     // for Expected<void>
#pragma once

#include <cassert>
#include <utility>
#include <variant>

#include "util/error.hpp"

namespace tpuctl {

template <typename T>
class [[nodiscard]] Expected {
public:
  Expected(T value) : m_v(std::in_place_index<0>, std::move(value)) {}
  Expected(Error error) : m_v(std::in_place_index<1>, std::move(error)) {}

  bool has_value() const { return m_v.index() == 0; }
  explicit operator bool() const { return has_value(); }

  T& value() & {
    assert(has_value());
    return std::get<0>(m_v);
  }
  const T& value() const& {
    assert(has_value());
    return std::get<0>(m_v);
  }
  T&& value() && {
    assert(has_value());
    return std::get<0>(std::move(m_v));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const& {
    assert(!has_value());
    return std::get<1>(m_v);
  }
  Error&& error() && {
    assert(!has_value());
    return std::get<1>(std::move(m_v));
  }

  template <typename U>
  T value_or(U&& fallback) const& {
    return has_value() ? value() : static_cast<T>(std::forward<U>(fallback));
  }

private:
  std::variant<T, Error> m_v;
};

template <>
class [[nodiscard]] Expected<void> {
public:
  Expected() = default;
  Expected(Error error) : m_error(std::move(error)), m_ok(false) {}

  bool has_value() const { return m_ok; }
  explicit operator bool() const { return m_ok; }
  const Error& error() const& {
    assert(!m_ok);
    return m_error;
  }
  Error&& error() && {
    assert(!m_ok);
    return std::move(m_error);
  }

private:
  Error m_error;
  bool m_ok = true;
};

using Status = Expected<void>;
inline Status ok() {
  return {};
}

} // namespace tpuctl

#define TPUCTL_CONCAT_INNER(a, b) a##b
#define TPUCTL_CONCAT(a, b) TPUCTL_CONCAT_INNER(a, b)

// Evaluates `expr` (an Expected); on error returns that error from the enclosing function.
#define TPUCTL_TRY(expr)                                                                           \
  do {                                                                                             \
    auto&& tpuctl_try_result_ = (expr);                                                            \
    if (!tpuctl_try_result_) {                                                                     \
      return std::move(tpuctl_try_result_).error();                                                \
    }                                                                                              \
  } while (false)

// `decl` = the value of `expr` (an Expected<T>); on error returns the error from the function.
#define TPUCTL_TRY_ASSIGN(decl, expr)                                                              \
  auto TPUCTL_CONCAT(tpuctl_try_, __LINE__) = (expr);                                              \
  if (!TPUCTL_CONCAT(tpuctl_try_, __LINE__)) {                                                     \
    return std::move(TPUCTL_CONCAT(tpuctl_try_, __LINE__)).error();                                \
  }                                                                                                \
  decl = std::move(*TPUCTL_CONCAT(tpuctl_try_, __LINE__))
