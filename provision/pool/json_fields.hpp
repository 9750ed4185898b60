// Whole numbers read from JSON that comes from outside: inventory files, what remote agents print.
// nlohmann's get<int>() converts any number with a cast, so {"port": 4294967318} became port 22
// and a float such as 1.7e20 read into int64 was undefined behaviour. These read a number only
// when it is a whole number within the range asked for.
#pragma once

#include <cstdint>
#include <optional>

#include <nlohmann/json.hpp>

namespace tpuctl::provision {

// `v` when it is a JSON integer in [min, max]; nullopt for anything else (a float, a string,
// null, an integer out of range). Never fails otherwise.
inline std::optional<int64_t> json_integer(const nlohmann::json& v, int64_t min, int64_t max) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (max < 0 || u > static_cast<uint64_t>(max) || static_cast<int64_t>(u) < min) {
      return std::nullopt;
    }
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    return i >= min && i <= max ? std::optional<int64_t>(i) : std::nullopt;
  }
  return std::nullopt;
}

} // namespace tpuctl::provision
