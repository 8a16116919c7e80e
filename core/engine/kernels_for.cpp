#include "core/engine/kernels_for.h"

#include "core/codegen/lower.h"
#include "core/codegen/upcast.h"
#include "core/ir/symbolic.h"
#include "core/schedule/schedule.h"

namespace polygrad {

namespace {

absl::StatusOr<LoweredKernel> lower(const UOpRef& root, const std::function<bool(const UOp*)>& materialized,
                                    bool for_gpu) {
  auto ast = lower_kernel(root, materialized, /*flat_output=*/for_gpu);
  if (!ast.ok()) return ast.status();
  UOpRef sink = graph_rewrite(ast->sink, symbolic());
  Upcast tiled = for_gpu ? Upcast{sink, {}} : apply_upcasts(sink);
  auto linear = linearize(tiled.sink, tiled.upcast_ranges);
  if (!linear.ok()) return linear.status();
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
