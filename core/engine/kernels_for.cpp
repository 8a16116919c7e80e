#include "core/engine/kernels_for.h"

#include <unordered_set>

#include "core/codegen/lower.h"
#include "core/codegen/upcast.h"
#include "core/ir/symbolic.h"
#include "core/schedule/schedule.h"

namespace polygrad {

namespace {

// GPU register tiles: a kernel with at least this many outputs that reduces (a matmul, a
// convolution) computes kGpuTile x kGpuTile of them per thread, which still leaves 2^16 threads or
// more; each operand element a thread loads then serves kGpuTile outputs. Smaller outputs keep a
// thread each: the GPU needs the threads more than the reuse.
constexpr int64_t kGpuTile = 4;
constexpr int64_t kMinGpuTiledOutputs = int64_t{1} << 20;

// Whether the kernel computing `root` reduces (reaches a REDUCE_AXIS before any loaded node).
bool reduces(const UOpRef& root, const std::function<bool(const UOp*)>& materialized) {
  std::vector<const UOp*> todo{root.get()};
  std::unordered_set<const UOp*> seen{root.get()};
  while (!todo.empty()) {
    const UOp* n = todo.back();
    todo.pop_back();
    if (n->op == Ops::REDUCE_AXIS) return true;
    for (const UOpRef& s : n->src)
      if (!materialized(s.get()) && seen.insert(s.get()).second) todo.push_back(s.get());
  }
  return false;
}

absl::StatusOr<LoweredKernel> lower(const UOpRef& root, const std::function<bool(const UOp*)>& materialized,
                                    bool for_gpu) {
  const bool tile = for_gpu && root->numel() >= kMinGpuTiledOutputs && reduces(root, materialized);
  auto ast = lower_kernel(root, materialized, /*flat_output=*/for_gpu, tile ? kGpuTile : 0);
  if (!ast.ok()) return ast.status();
  UOpRef sink = graph_rewrite(ast->sink, symbolic());
  Upcast tiled = for_gpu ? Upcast{sink, ast->tile_ranges} : apply_upcasts(sink);
  auto linear = linearize(tiled.sink, tiled.upcast_ranges);
  if (!linear.ok()) return linear.status();
  linear->tile_square = ast->tile_square;
  // A GPU launch passes every lowered parameter, then n, by position: the kernel must declare
  // them all, even one whose load symbolic rewriting removed (the linear kernel lists only the
  // DEFINE_GLOBALs still present). The CPU's kernels index an array and need no such care.
  if (for_gpu && linear->params.size() < ast->params.size()) linear->params.resize(ast->params.size(), DType::Void);
  for (size_t i = 0; for_gpu && i < ast->params.size(); ++i)
    if (linear->params[i] == DType::Void) linear->params[i] = ast->params[i]->dtype;
  return LoweredKernel{std::move(*linear), std::move(ast->params)};
}

}  // namespace

absl::StatusOr<LoweredKernel> lower_to_linear(const UOpRef& root,
                                              const std::function<bool(const UOp*)>& materialized) {
  return lower(root, materialized, /*for_gpu=*/false);
}

absl::StatusOr<LoweredKernel> lower_for_cuda(const UOpRef& root, const std::function<bool(const UOp*)>& materialized) {
  return lower(root, materialized, /*for_gpu=*/true);
}

absl::StatusOr<std::vector<LinearKernel>> kernels_for(const std::vector<UOpRef>& outputs,
                                                      const std::function<bool(const UOp*)>& is_bound, bool cuda) {
  auto sched = create_schedule(outputs, is_bound);
  if (!sched.ok()) return sched.status();
  auto materialized = [&](const UOp* n) { return sched->materialized.count(n) > 0; };
  std::vector<LinearKernel> out;
  for (const ScheduleItem& item : sched->items) {
    if (item.root->numel() == 0) continue;
    auto k = cuda ? lower_for_cuda(item.root, materialized) : lower_to_linear(item.root, materialized);
    if (!k.ok()) return k.status();
    out.push_back(std::move(k->linear));
  }
  return out;
}

}  // namespace polygrad
