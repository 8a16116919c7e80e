// Runs a program without a shell: argv goes straight to posix_spawnp, so no argument is ever
// interpreted, and a deadline kills it.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace polygrad {

struct ProcessResult {
  int exit_code;       // -1 when killed by a signal
  std::string output;  // stdout and stderr together, truncated to 64 KiB
};

// DEADLINE_EXCEEDED when it runs past `timeout` (it is killed); NOT_FOUND when it cannot start.
absl::StatusOr<ProcessResult> run_process(const std::vector<std::string>& argv, std::chrono::milliseconds timeout);

}  // namespace polygrad
