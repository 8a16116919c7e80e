// The vector loads of an unrolled upcast loop (CStyleRenderer::has_vector_loads).
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/render/cstyle_emitter.h"

namespace polygrad {

// The vector loads to emit before the upcast loop that k.ops[at] opens: each load inside it
// (not in a nested loop) that reads the loop variable + base, base a multiple of the trip count
// already computed, with 8 or 16 bytes for all lanes, becomes one load here; inside the loop
// each lane reads its element of that value (vector_lane_). A RANGE node opens one loop per
// place it is used, so the position, not the node, says which loop.
std::vector<std::string> CStyleRenderer::Emitter::vector_loads(const LinearKernel& k, size_t at) {
  std::vector<std::string> out;
  const UOp* r = k.ops[at].get();
  if (r->src[0]->op != Ops::CONST || !t_.has_vector_loads()) return out;
  const int64_t trip = r->src[0]->arg_int();
  if (trip != 2 && trip != 4) return out;
  // The loop's ops, where each node is emitted in it, and how many of its ops read it.
  size_t end = at + 1;
  std::unordered_map<const UOp*, size_t> where;
  std::unordered_map<const UOp*, int> readers;
  for (int depth = 0; end < k.ops.size(); ++end) {
    const UOp& n = *k.ops[end];
    if (n.op == Ops::RANGE) ++depth;
    if (n.op == Ops::END_RANGE && depth-- == 0) break;
    where.emplace(&n, end);
    for (const UOpRef& s : n.src) ++readers[s.get()];
  }
  int depth = 0;
  for (size_t i = at + 1; i < end; ++i) {
    const UOp& n = *k.ops[i];
    if (n.op == Ops::RANGE) ++depth;
    if (n.op == Ops::END_RANGE) --depth;
    if (depth != 0 || n.op != Ops::LOAD || n.src.size() != 2 || absorbed_.count(&n)) continue;
    const size_t bytes = static_cast<size_t>(trip) * dtype_itemsize(n.dtype);
    if (bytes != 8 && bytes != 16) continue;
    if (staged_element_.count(&n)) {
      // A staged load by column: the tile's columns are consecutive in shared memory, from an
      // offset that is a multiple of the tile (the array is aligned to 16 bytes).
      auto base = staged_vector_base_.find(&n);
      if (base == staged_vector_base_.end() || r->arg_int() != staging_->col_id || trip != staging_->tile) continue;
      const std::string v = absl::StrCat("pg_vec", next_vec_++);
      out.push_back(absl::StrFormat("const auto %s = %s;", v, t_.vector_load(bytes, base->second)));
      vector_lane_[&n] = absl::StrFormat("((const %s*)&%s)[r%d]", t_.storage_type(n.dtype), v, r->arg_int());
      continue;
    }
    std::vector<const UOp*> terms;
    add_terms(n.src[1].get(), terms);
    bool lane = false, ready = true;
    std::string base;
    for (const UOp* t : terms) {
      if (t == r && !lane) {
        lane = true;
        continue;
      }
      // Computed before the loop (so independent of it), and keeping the alignment.
      ready = ready && t != r && (t->op == Ops::CONST || t->op == Ops::RANGE || names_.count(t)) &&
              multiple_of(*t, trip);
      if (ready) base = base.empty() ? plain_name(*t) : absl::StrCat(base, " + ", plain_name(*t));
    }
    if (!lane || !ready) continue;
    const std::string v = absl::StrCat("pg_vec", next_vec_++);
    const std::string load = t_.vector_load(bytes, absl::StrCat(plain_name(*n.src[0]), " + ", base.empty() ? "0" : base));
    if (load.empty()) return {};
    out.push_back(absl::StrFormat("const auto %s = %s;", v, load));
    vector_lane_[&n] = absl::StrFormat("((const %s*)&%s)[r%d]", t_.storage_type(n.dtype), v, r->arg_int());
    // The scalar index is no longer read here (an unread variable is a warning).
    drop_reader(n.src[1].get(), where, readers);
  }
  return out;
}

// The summands of an index expression: through ADDs not computed yet (a computed one is a
// named value, itself a summand).
void CStyleRenderer::Emitter::add_terms(const UOp* u, std::vector<const UOp*>& out) const {
  if (u->op == Ops::ADD && !dtype_is_float(u->dtype) && !names_.count(u)) {
    for (const UOpRef& s : u->src) add_terms(s.get(), out);
    return;
  }
  out.push_back(u);
}

// One reader of `u` fewer in the loop whose ops `where` places; the emission of a node in it
// that nobody there reads any more is skipped, and its sources lose it as a reader.
void CStyleRenderer::Emitter::drop_reader(const UOp* u, const std::unordered_map<const UOp*, size_t>& where,
                                          std::unordered_map<const UOp*, int>& readers) {
  if (u->op == Ops::RANGE || u->op == Ops::DEFINE_ACC || u->op == Ops::LOAD) return;  // loops, state, memory
  auto at = where.find(u);
  if (at == where.end() || --readers[u] > 0) return;
  skipped_.insert(at->second);
  for (const UOpRef& s : u->src) drop_reader(s.get(), where, readers);
}

// Whether index expression `u` is always a multiple of `m`.
bool CStyleRenderer::Emitter::multiple_of(const UOp& u, int64_t m) {
  switch (u.op) {
    case Ops::CONST: return !dtype_is_float(u.dtype) && u.arg_int() % m == 0;
    case Ops::MUL: return multiple_of(*u.src[0], m) || multiple_of(*u.src[1], m);
    case Ops::ADD: return multiple_of(*u.src[0], m) && multiple_of(*u.src[1], m);
    default: return false;
  }
}

}  // namespace polygrad
