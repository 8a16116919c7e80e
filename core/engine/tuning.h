// Tuning (EngineOptions::tune, the daemon's --tune): a CPU kernel's register tiling picked by
// timing its candidates (codegen/upcast.h: upcast_candidates) on the device, the winner kept in
// the kernel cache as a record, so that every daemon on that cache directory or remote store uses
// it without searching again.
//
// The record's key is derived from the kernel's key as the heuristic renders it, which already
// names the device, the compiler identity and the kernel's whole structure (kernel_cache.h). Its
// payload is an UpcastChoice's encoding; one that does not decode is ignored like a missing one.
//
// Modes: off (the heuristic, no lookup), cached (a stored record is used; none: the heuristic),
// search (none stored: every candidate is compiled, then timed one after another on zero-filled
// buffers, and the fastest is stored). Different tilings may sum a reduction in another order, so
// a tuned kernel's float results may differ from the heuristic's in the last bits.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/codegen/upcast.h"
#include "core/engine/backend.h"
#include "core/engine/engine.h"
#include "core/engine/pipeline.h"
#include "core/engine/pass_log.h"

namespace polygrad {

struct TunedKernel {
  GeneratedKernel generated;
  RenderedKernel rendered;
  UpcastChoice choice;
};

// The record key of a kernel whose heuristic rendering has kernel-cache key `kernel_key`.
std::string tuning_key(const std::string& kernel_key);

// For the kernel computing `root`, generated and rendered with the heuristic's tiling as
// `heuristic`: the tuned kernel when the mode and the cache give a choice other than the
// heuristic's, else nullopt (keep `heuristic`). Reports the lookup to the engine's observer
// (EngineObserver::on_tuning). `options.tune_search` searches whatever the engine's mode; a search
// polls `options.should_stop`. Errors: a search's compile or launch failure, or CANCELLED.
absl::StatusOr<std::optional<TunedKernel>> tune_kernel(Engine::Impl& impl, Backend& backend, const UOpRef& root,
                                                       const std::function<bool(const UOp*)>& materialized,
                                                       const GeneratedKernel& heuristic_generated,
                                                       const RenderedKernel& heuristic, PassLog& log, size_t index,
                                                       const RealizeOptions& options);

}  // namespace polygrad
