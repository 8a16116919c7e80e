#include "core/render/index_pruning.h"

namespace polygrad {

void skip_unread_index_math(const LinearKernel& k, const std::unordered_set<const UOp*>& index_unread,
                            std::unordered_set<size_t>& skipped) {
  auto index_math = [](const UOp& n) {
    return !dtype_is_float(n.dtype) && (n.op == Ops::ADD || n.op == Ops::SUB || n.op == Ops::MUL ||
                                        n.op == Ops::IDIV || n.op == Ops::MOD);
  };
  auto reads = [&](size_t q, const UOp* u) {
    const UOp& r = *k.ops[q];
    for (size_t i = 0; i < r.src.size(); ++i)
      if (r.src[i].get() == u && !(i == 1 && index_unread.count(&r))) return true;
    return false;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t p = 0; p < k.ops.size(); ++p) {
      if (skipped.count(p) || !index_math(*k.ops[p])) continue;
      bool read = false;
      for (size_t q = p + 1, depth = 0; q < k.ops.size() && !read; ++q) {
        if (k.ops[q]->op == Ops::END_RANGE && depth-- == 0) break;
        if (k.ops[q]->op == Ops::RANGE) ++depth;
        read = !skipped.count(q) && reads(q, k.ops[p].get());
      }
      if (!read) changed = skipped.insert(p).second;
    }
  }
}

}  // namespace polygrad
