#include "core/engine/kernels_for.h"

#include "core/codegen/lower.h"
#include "core/codegen/upcast.h"
#include "core/ir/symbolic.h"
#include "core/schedule/schedule.h"

namespace polygrad {

absl::StatusOr<LoweredKernel> lower_to_linear(const UOpRef& root,
                                              const std::function<bool(const UOp*)>& materialized) {
  auto ast = lower_kernel(root, materialized);
  if (!ast.ok()) return ast.status();
  UOpRef sink = graph_rewrite(ast->sink, symbolic());
  Upcast tiled = apply_upcasts(sink);
  auto linear = linearize(tiled.sink, tiled.upcast_ranges);
  if (!linear.ok()) return linear.status();
  return LoweredKernel{std::move(*linear), std::move(ast->params)};
}

absl::StatusOr<std::vector<LinearKernel>> kernels_for(const std::vector<UOpRef>& outputs,
                                                      const std::function<bool(const UOp*)>& is_bound) {
  auto sched = create_schedule(outputs, is_bound);
  if (!sched.ok()) return sched.status();
  auto materialized = [&](const UOp* n) { return sched->materialized.count(n) > 0; };
  std::vector<LinearKernel> out;
  for (const ScheduleItem& item : sched->items) {
    if (item.root->numel() == 0) continue;
    auto k = lower_to_linear(item.root, materialized);
    if (!k.ok()) return k.status();
    out.push_back(std::move(k->linear));
  }
  return out;
}

}  // namespace polygrad
