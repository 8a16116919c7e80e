#include "core/schedule/realize_program.h"

#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace polygrad {

absl::StatusOr<RealizeProgram> make_program(const Schedule& sched, std::vector<CompiledKernel> kernels,
                                            const std::vector<const UOp*>& key_leaves, const Bindings& bound,
                                            std::vector<BufferPtr>& leaf_buffers) {
  RealizeProgram program;
  std::unordered_map<const UOp*, uint32_t> slot;
  for (const UOp* leaf : key_leaves) slot.emplace(leaf, static_cast<uint32_t>(slot.size()));
  auto add_leaf = [&](const UOp* n) {
    auto b = bound.find(n);
    if (b == bound.end() || slot.count(n)) return;
    slot.emplace(n, static_cast<uint32_t>(slot.size()));
    leaf_buffers.push_back(b->second);
    program.cacheable = false;
  };
  for (const CompiledKernel& k : kernels)
    for (const UOp* p : k.params) add_leaf(p);
  for (const UOpRef& o : sched.outputs) add_leaf(o.get());
  program.leaves = static_cast<uint32_t>(slot.size());
  for (size_t i = 0; i < sched.items.size(); ++i)
    slot.emplace(sched.items[i].root.get(), static_cast<uint32_t>(program.leaves + i));

  auto slot_of = [&](const UOp* n) -> absl::StatusOr<uint32_t> {
    auto it = slot.find(n);
    if (it == slot.end()) return absl::InternalError(absl::StrCat("kernel argument ", n->str(), " has no buffer"));
    return it->second;
  };
  for (const UOpRef& o : sched.outputs) {
    absl::StatusOr<uint32_t> s = slot_of(o.get());
    if (!s.ok()) return s.status();
    program.outputs.push_back(*s);
  }
  const std::unordered_set<uint32_t> kept(program.outputs.begin(), program.outputs.end());
  std::unordered_map<uint32_t, size_t> last_use;
  for (size_t i = 0; i < kernels.size(); ++i) {
    RealizeProgram::Launch launch;
    const UOp* out = kernels[i].params.at(0);
    launch.dtype = out->dtype;
    launch.shape = out->shape;
    for (const UOp* p : kernels[i].params) {
      absl::StatusOr<uint32_t> s = slot_of(p);
      if (!s.ok()) return s.status();
      launch.args.push_back(*s);
      last_use[*s] = i;
    }
    if (launch.args[0] != program.leaves + i) return absl::InternalError("kernel output out of schedule order");
    launch.kernel = std::move(kernels[i]);
    launch.kernel.params.clear();
    program.launches.push_back(std::move(launch));
  }
  for (const auto& [s, i] : last_use)
    if (s >= program.leaves && !kept.count(s)) program.launches[i].release.push_back(s);
  return program;
}

}  // namespace polygrad
