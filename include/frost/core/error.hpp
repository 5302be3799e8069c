// frost::Error and the checking helpers every layer uses to report bad input.
#pragma once
#include <cstdint>
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

/// An index out of its dim's bounds (gather, index_select, scatter, embedding,
/// ...), on any device: an Error, kept apart so that an op built on an index
/// kernel can say which of its own inputs was wrong without also catching,
/// say, running out of memory.
struct IndexError : Error {
  using Error::Error;
};

namespace detail {
template <class E, class... A>
[[noreturn]] __attribute__((noinline, cold)) void fail_as(const A&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  throw E(os.str());
}
template <class... A>
[[noreturn]] __attribute__((noinline, cold)) void fail(const A&... parts) {
  fail_as<Error>(parts...);
}
/// The message every index kernel gives for index i of a dim of `size`.
template <class... A>
[[noreturn]] __attribute__((noinline, cold)) void fail_index(const char* op, std::int64_t i, std::int64_t dim,
                                                             std::int64_t size, const A&... where) {
  fail_as<IndexError>("frost::", op, ": index ", i, " is out of bounds for dim ", dim, " with size ", size,
                      " (expected 0 <= index < ", size, where..., ")");
}
}  // namespace detail

}  // namespace frost

/// Throws frost::Error with the streamed message parts when `cond` is false.
/// The parts are only formatted on failure, so checks cost one branch.
#define FROST_CHECK(cond, ...)                                  \
  do {                                                          \
    if (FROST_UNLIKELY(!(cond))) ::frost::detail::fail(__VA_ARGS__); \
  } while (0)
