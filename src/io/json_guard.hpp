// JSON text before any field is read: size, nesting depth, duplicate keys and syntax, each
// problem with its line and column. Private to the library.
#pragma once

#include <cstddef>
#include <string>

#include "io/json_fields.hpp"

namespace shellsim::json_guard {

// Scene files are a few kilobytes; the limits keep a hostile or corrupted file from
// exhausting memory or, through deep nesting, the stack of recursive JSON code.
inline constexpr std::size_t kMaxSceneBytes = std::size_t{16} << 20;
inline constexpr std::size_t kMaxDepth = 64;

// The parsed document; throws InputError naming `source` (and the line and column) for
// text that is too large, too deep, has a key twice or is not JSON.
[[nodiscard]] json_fields::Json parseJson(const std::string& text, const std::string& source,
                                          json_fields::Problems& problems);

}  // namespace shellsim::json_guard
