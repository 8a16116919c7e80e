// Runs a program without a shell: argv goes straight to posix_spawnp, so no argument is ever
// interpreted, and a deadline kills it. The program runs in a process group of its own, and a
// kill takes the whole group: a compiler driver's cc1 and linker go with it.
#pragma once

#include <chrono>
#include <functional>
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
// `abandoned`, when given, is asked every kAbandonPoll while the program runs: once it says true
// nobody wants the result any more, the program is killed and the answer is CANCELLED.
absl::StatusOr<ProcessResult> run_process(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                                          const std::function<bool()>& abandoned = {});
inline constexpr std::chrono::milliseconds kAbandonPoll{50};

}  // namespace polygrad
