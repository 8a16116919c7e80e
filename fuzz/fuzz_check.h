// What the fuzz targets share: a broken invariant aborts with its reason on stderr, which
// libFuzzer records as a crash and saves the input for (docs/TESTING.md says how to replay it).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace polygrad::fuzz {

[[noreturn]] inline void fail(std::string_view why) {
  std::fprintf(stderr, "fuzz invariant broken: %.*s\n", static_cast<int>(why.size()), why.data());
  std::abort();
}

inline void check(bool ok, std::string_view why) {
  if (!ok) fail(why);
}

// POLYGRAD_FUZZ_VERBOSE=1 prints every refusal: to see how far a seed gets (docs/TESTING.md).
inline bool verbose() {
  static const bool v = std::getenv("POLYGRAD_FUZZ_VERBOSE") != nullptr;
  return v;
}

// Bad input must be refused as the client's error (INVALID_ARGUMENT, RESOURCE_EXHAUSTED, ...)
// with a message. INTERNAL and UNKNOWN mean the code under test broke (STYLE item 13).
inline void check_refusal(const absl::Status& s, std::string_view where) {
  check(!s.ok(), std::string(where) + ": expected an error");
  check(s.code() != absl::StatusCode::kInternal && s.code() != absl::StatusCode::kUnknown,
        std::string(where) + ": bad input reported as a bug: " + s.ToString());
  check(!s.message().empty(), std::string(where) + ": error without a message");
  if (verbose()) std::fprintf(stderr, "%s refused: %s\n", std::string(where).c_str(), s.ToString().c_str());
}

// Runs one input; an exception escaping the code under test is a crash too (the daemon would
// lose the request, or terminate), reported with its message.
template <typename F>
int guarded(F&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    fail(std::string("exception escaped: ") + e.what());
  } catch (...) {
    fail("exception of unknown type escaped");
  }
  return 0;
}

}  // namespace polygrad::fuzz
