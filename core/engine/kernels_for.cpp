#include "core/engine/kernels_for.h"

#include "core/engine/cuda_backend.h"
#include "core/engine/pipeline.h"
#include "core/schedule/schedule.h"

namespace polygrad {

absl::StatusOr<GeneratedKernel> lower_to_linear(const UOpRef& root,
                                                const std::function<bool(const UOp*)>& materialized) {
  PassLog log(nullptr);
  return generate_kernel(root, materialized, CodegenCaps{}, log);
}

absl::StatusOr<GeneratedKernel> lower_for_cuda(const UOpRef& root,
                                               const std::function<bool(const UOp*)>& materialized) {
  PassLog log(nullptr);
  return generate_kernel(root, materialized, kCudaCaps, log);
}

absl::StatusOr<std::vector<LinearKernel>> kernels_for(const std::vector<UOpRef>& outputs,
                                                      const std::function<bool(const UOp*)>& is_bound, bool cuda) {
  auto sched = create_schedule(outputs, is_bound,
                               {.fuse_row_reductions = (cuda ? kCudaCaps : CodegenCaps{}).fuse_row_reductions});
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
