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
  int signal = 0;      // the signal that killed it; 0 when it exited

  // "exit 3", or "killed by signal 11 (Segmentation fault)".
  std::string how_it_ended() const;
};

// DEADLINE_EXCEEDED when it runs past `timeout` (it is killed); NOT_FOUND when it cannot start.
absl::StatusOr<ProcessResult> run_process(const std::vector<std::string>& argv, std::chrono::milliseconds timeout);

}  // namespace polygrad
