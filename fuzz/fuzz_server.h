// The server-side fuzz targets' fixture: one engine for the process (creating one probes the
// compiler, far too slow per input) and small limits, so that huge shapes and long node lists
// are refused at once instead of spending the run on allocation.
#pragma once

#include <memory>

#include "core/engine/engine.h"
#include "google/protobuf/stubs/logging.h"
#include "fuzz/fuzz_check.h"
#include "server/options.h"

namespace polygrad::fuzz {

// Protobuf logs each string field with invalid UTF-8 it parses (several per mutated input):
// that is the parser refusing the input, which the targets return early for, not news.
inline const bool kQuietProtobuf = [] {
  google::protobuf::SetLogHandler(nullptr);
  return true;
}();

inline Engine& engine() {
  static Engine* e = [] {
    // CPU only: no device probing; the in-memory kernel cache is never used (nothing compiles).
    absl::StatusOr<std::unique_ptr<Engine>> made = Engine::create({.threads = 1, .devices = {"cpu"}});
    if (!made.ok()) fail("cannot create the engine: " + made.status().ToString());
    return made->release();  // lives as long as the process: inputs run until it exits
  }();
  return *e;
}

inline const server::Limits& limits() {
  static const server::Limits l = [] {
    server::Limits l;
    l.max_nodes_per_request = 64;
    l.max_rank = 6;
    l.max_elements = 4096;
    l.max_inline_bytes = 64 << 10;
    l.max_graph_depth = 256;
    return l;
  }();
  return l;
}

}  // namespace polygrad::fuzz
