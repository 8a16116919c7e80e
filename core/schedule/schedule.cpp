#include "core/schedule/schedule.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "core/frontend/tensor_ops.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace polygrad {
namespace {

// Post-order over the nodes reachable from `outputs`, not descending below bound nodes.
std::vector<UOpRef> reachable(const std::vector<UOpRef>& outputs, const std::function<bool(const UOp*)>& is_bound) {
  std::vector<UOpRef> order;
  std::unordered_set<const UOp*> seen;
  std::vector<std::pair<UOpRef, size_t>> stack;
  for (const UOpRef& out : outputs) {
    if (!seen.insert(out.get()).second) continue;
    stack.emplace_back(out, 0);
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (!is_bound(node.get()) && next < node->src.size()) {
        UOpRef child = node->src[next++];
        if (seen.insert(child.get()).second) stack.emplace_back(std::move(child), 0);
      } else {
        order.push_back(node);
        stack.pop_back();
      }
    }
  }
  return order;
}

constexpr int64_t kSplitThreshold = 1 << 15;
// The most ops fused into one kernel along any path; a taller chain continues in a new kernel,
// so arbitrarily long client chains compile (and code generation's recursion stays shallow).
constexpr int kMaxFusedHeight = 256;
// An elementwise value a reduction reads through a broadcast is recomputed once per slot of the
// broadcast axis (a matmul operand: once per output column tile). Up to this many ALU ops that
// is cheaper than a kernel and a round trip through memory; beyond it the value gets a buffer.
// The MLP's relu-backward feeding dW1 = dh.T @ x (7 ops, recomputed 49 times) measured 4x
// slower fused.
constexpr int kMaxRecomputedAlu = 3;
// A padded value is computed in the kernel that reads it through the padding (a cat is a sum of
// padded parts). Past this many ALU ops it gets a buffer of its own instead: a cat of many large
// expressions otherwise becomes one kernel holding all of them, whose C took clang over two
// minutes (126 float16 pow gradients packed into one tensor).
constexpr int kMaxPaddedAlu = 32;

// The inner chunk length for a reduction of `r` elements: a divisor near sqrt(r), at least 256,
// or 0 when r has none worth using.
int64_t chunk_for(int64_t r) {
  auto root = static_cast<int64_t>(std::sqrt(static_cast<double>(r)));
  for (int64_t d = root; d >= 256; --d)
    if (r % d == 0) return d;
  for (int64_t d = root + 1; d <= std::min<int64_t>(r / 2, 8192); ++d)
    if (r % d == 0) return d;
  return 0;
}

// reduce(x, axes) as reduce(reduce(x', inner chunk), outer), with x' the reduced axes moved
// last and flattened. Returns null when the reduction is small or cannot be split evenly;
// `first_stage` receives the inner reduction, which must get a kernel of its own.
UOpRef split_reduce(const UOpRef& n, UOpRef& first_stage) {
  const ReduceArg& r = n->arg_reduce();
  const UOpRef& x = n->src[0];
  int64_t total = 1;
  for (int64_t a : r.axes) total *= x->shape[a];
  if (total < kSplitThreshold) return nullptr;
  int64_t inner = chunk_for(total);
  if (inner == 0) return nullptr;
  std::vector<int64_t> perm;
  Shape kept;
  for (size_t i = 0; i < x->shape.size(); ++i)
    if (!std::count(r.axes.begin(), r.axes.end(), static_cast<int64_t>(i))) {
      perm.push_back(static_cast<int64_t>(i));
      kept.push_back(x->shape[i]);
    }
  perm.insert(perm.end(), r.axes.begin(), r.axes.end());
  Shape split = kept;
  split.insert(split.end(), {total / inner, inner});
  auto k = static_cast<int64_t>(kept.size());
  auto moved = frontend::permute(x, perm);
  if (!moved.ok()) return nullptr;
  auto chunks = frontend::reshape(*moved, split);
  if (!chunks.ok()) return nullptr;
  auto stage1 = frontend::reduce(r.op, *chunks, {k + 1});
  if (!stage1.ok()) return nullptr;
  auto stage2 = frontend::reduce(r.op, *stage1, {k});
  if (!stage2.ok()) return nullptr;
  auto out = frontend::reshape(*stage2, n->shape);
  if (!out.ok()) return nullptr;
  first_stage = *stage1;
  return *out;
}

// Tensor-level passes over the unbound part of the graph (bound nodes are leaves: their
// history is never rebuilt, so their bindings stay valid).
std::vector<UOpRef> rewrite_outputs(const std::vector<UOpRef>& outputs, const std::function<bool(const UOp*)>& is_bound,
                                    std::unordered_set<const UOp*>& forced, std::vector<UOpRef>& keep) {
  std::unordered_map<const UOp*, UOpRef> done;
  for (const UOpRef& n : reachable(outputs, is_bound)) {
    UOpRef cur = n;
    if (!is_bound(n.get())) {
      std::vector<UOpRef> src;
      bool changed = false;
      for (const UOpRef& s : n->src) {
        src.push_back(done.at(s.get()));
        changed |= src.back() != s;
      }
      if (changed) cur = uop(n->op, n->dtype, std::move(src), n->arg, n->shape);
      if (cur->op == Ops::REDUCE_AXIS) {
        UOpRef first;
        if (UOpRef split = split_reduce(cur, first)) {
          forced.insert(first.get());
          keep.push_back(first);
          cur = split;
        }
      }
    }
    keep.push_back(cur);
    done[n.get()] = cur;
  }
  std::vector<UOpRef> out;
  for (const UOpRef& o : outputs) out.push_back(done.at(o.get()));
  return out;
}

// The longest row a fused row reduction may have: its passes re-read the row from the cache
// (16 KiB of float32). softmax 512x8192 fused measured 4.7-5.2 ms against 4.3-4.6 in three
// kernels (2 cores, AVX-512); 1024x2048, fused under either limit, 2.5 ms.
constexpr int64_t kMaxFusedRow = 4096;

// A REDUCE_AXIS over the last axis alone, of a tensor of rank 2 or more (its rows).
bool reduces_rows(const UOp& n) {
  const size_t rank = n.shape.size();
  return n.op == Ops::REDUCE_AXIS && rank >= 2 &&
         n.arg_reduce().axes == std::vector<int64_t>{static_cast<int64_t>(rank) - 1};
}

// Whether the step from `user` to its source `src` keeps the rows of a row-fused kernel
// (ScheduleOptions::fuse_row_reductions): elementwise, a broadcast along the last axis only, or a
// reduction over the last axis only.
bool keeps_rows(const UOp& user, const UOp& src) {
  if (is_alu(user.op)) return src.shape == user.shape;
  const size_t rank = user.shape.size();
  if (rank < 2 || src.shape.size() != rank ||
      !std::equal(user.shape.begin(), user.shape.end() - 1, src.shape.begin()))
    return false;
  return (user.op == Ops::EXPAND && src.shape.back() == 1) || reduces_rows(user);
}

struct Reach {
  const UOp* root = nullptr;  // the single kernel root reaching this node, if only one
  bool many_roots = false;
  bool through_expand = false;
  bool keeps_rows = true;        // every path from the root is keeps_rows steps (rank >= 2 root)
  bool in_reduce = false;        // inside a reduction of the kernel it belongs to
  bool reduce_broadcast = false;  // ... and read through a broadcast there (recomputed per slot)
};

}  // namespace

absl::StatusOr<Schedule> create_schedule(const std::vector<UOpRef>& outputs,
                                         const std::function<bool(const UOp*)>& is_bound,
                                         const ScheduleOptions& options) {
  Schedule sched;
  std::unordered_set<const UOp*> forced;
  std::vector<UOpRef> rewritten;
  sched.outputs = rewrite_outputs(outputs, is_bound, forced, rewritten);
  sched.keep = reachable(sched.outputs, is_bound);
  std::unordered_set<const UOp*> is_output;
  for (const UOpRef& o : sched.outputs) is_output.insert(o.get());

  // Sources before users: ALU ops each node would compute inside a kernel (up to the next
  // reduction or buffer), to weigh recomputation against materialization.
  std::unordered_map<const UOp*, int> alu_ops;
  for (const UOpRef& n : sched.keep) {
    int count = is_alu(n->op) ? 1 : 0;
    for (const UOpRef& s : n->src)
      if (s->op != Ops::REDUCE_AXIS && !is_bound(s.get())) count += alu_ops[s.get()];
    alu_ops[n.get()] = std::min(count, kMaxFusedHeight);
  }

  // Walk users before sources, deciding which reductions become kernel roots.
  std::unordered_map<const UOp*, Reach> reach;
  for (auto it = sched.keep.rbegin(); it != sched.keep.rend(); ++it) {
    const UOp* n = it->get();
    if (is_bound(n)) {
      sched.materialized.insert(n);
      continue;
    }
    if (n->op == Ops::BUFFER)
      return absl::FailedPreconditionError(absl::StrCat("buffer ", n->arg_int(), " has no data bound to it"));
    Reach r = reach[n];
    bool recomputed = is_alu(n->op) && r.reduce_broadcast && alu_ops[n] > kMaxRecomputedAlu;
    // Padding read inside a reduction (conv, pooling windows) would put a bounds check on every
    // load of the hot loop, which keeps it from vectorising; one padded copy is cheaper.
    bool padded_window = n->op == Ops::PAD && r.in_reduce;
    const bool row_fused = options.fuse_row_reductions && reduces_rows(*n) && !r.many_roots && r.keeps_rows &&
                           n->src[0]->shape.back() <= kMaxFusedRow;
    bool root = is_output.count(n) > 0 || forced.count(n) > 0 || recomputed || padded_window ||
                (n->op == Ops::REDUCE_AXIS && (r.many_roots || (r.through_expand && !row_fused)));
    if (root) {
      sched.materialized.insert(n);
      r = Reach{n, false, false};
      r.keeps_rows = n->shape.size() >= 2;
    }
    if (n->op == Ops::PAD && !is_bound(n->src[0].get()) && alu_ops[n->src[0].get()] > kMaxPaddedAlu)
      forced.insert(n->src[0].get());
    for (const UOpRef& s : n->src) {
      Reach& sr = reach[s.get()];
      if (sr.root == nullptr && !sr.many_roots) {
        sr.root = r.root;
      } else if (sr.root != r.root) {
        sr.many_roots = true;
      }
      sr.many_roots |= r.many_roots;
      sr.keeps_rows &= r.keeps_rows && keeps_rows(*n, *s);
      // A gathered source is read at positions chosen by data, some many times, like a broadcast.
      const bool spread = n->op == Ops::EXPAND || (n->op == Ops::GATHER && s == n->src[0]);
      sr.through_expand |= r.through_expand || spread;
      sr.in_reduce |= r.in_reduce || n->op == Ops::REDUCE_AXIS;
      sr.reduce_broadcast |= r.reduce_broadcast || (r.in_reduce && spread);
    }
  }
  // Sources before users: cut chains that grew taller than kMaxFusedHeight inside one kernel.
  std::unordered_map<const UOp*, int> height;
  for (const UOpRef& n : sched.keep) {
    int h = 0;
    for (const UOpRef& s : n->src) h = std::max(h, height[s.get()] + 1);
    if (h > kMaxFusedHeight && n->op != Ops::CONST) sched.materialized.insert(n.get());
    height[n.get()] = sched.materialized.count(n.get()) ? 0 : h;
  }
  for (const UOpRef& n : sched.keep)
    if (sched.materialized.count(n.get()) && !is_bound(n.get())) sched.items.push_back({n});
  sched.keep.insert(sched.keep.end(), rewritten.begin(), rewritten.end());
  return sched;
}

}  // namespace polygrad
