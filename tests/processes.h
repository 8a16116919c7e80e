// Whether a process still runs, for tests that check a child was killed: a killed child that
// nobody has reaped yet (a zombie) has stopped running, so it counts as gone.
#pragma once

#include <sys/types.h>

#include <fstream>
#include <ios>
#include <iterator>
#include <string>

namespace polygrad::testing {

inline bool running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  try {
    text.assign(std::istreambuf_iterator<char>(stat), std::istreambuf_iterator<char>());
  } catch (const std::ios_base::failure&) {
    // The process exited between the open and the read (ESRCH): libstdc++'s filebuf throws
    // from underflow on a read error whatever the stream's exception mask.
    return false;
  }
  if (text.empty()) return false;
  // The state follows the command name in parentheses, which may itself hold ") ".
  const size_t close = text.rfind(") ");
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z' && text[close + 2] != 'X';
}

}  // namespace polygrad::testing
