// frost::Error and the checking helpers every layer uses to report bad input.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

#include "macros.hpp"

namespace frost {

/// The exception frost throws for bad input: the message names the op, the
/// shapes / dtypes / devices involved and what was expected.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace detail {
template <class... A>
[[noreturn]] __attribute__((noinline, cold)) void fail(const A&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  throw Error(os.str());
}
}  // namespace detail

}  // namespace frost

/// Throws frost::Error with the streamed message parts when `cond` is false.
/// The parts are only formatted on failure, so checks cost one branch.
#define FROST_CHECK(cond, ...)                                  \
  do {                                                          \
    if (FROST_UNLIKELY(!(cond))) ::frost::detail::fail(__VA_ARGS__); \
  } while (0)
