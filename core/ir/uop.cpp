#include "core/ir/uop.h"
#include "core/ir/symbolic_dims.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace polygrad {
namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  // splitmix64 finaliser over a running combination: cheap, stable, well distributed.
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  return h ^ (h >> 31);
}

uint64_t hash_arg(const Arg& arg) {
  uint64_t h = arg.index();
  if (auto* i = std::get_if<int64_t>(&arg)) return mix(h, static_cast<uint64_t>(*i));
  if (auto* d = std::get_if<double>(&arg)) {
    uint64_t bits;
    std::memcpy(&bits, d, sizeof bits);
    return mix(h, bits);
  }
  if (auto* v = std::get_if<std::vector<int64_t>>(&arg)) {
    for (int64_t x : *v) h = mix(h, static_cast<uint64_t>(x));
    return mix(h, v->size());
  }
  if (auto* r = std::get_if<ReduceArg>(&arg)) {
    h = mix(h, static_cast<uint64_t>(r->op));
    for (int64_t x : r->axes) h = mix(h, static_cast<uint64_t>(x));
  }
  return h;
}

// Doubles compare by bit pattern so that NaN constants intern and -0.0 stays distinct from 0.0.
bool arg_equal(const Arg& a, const Arg& b) {
  if (a.index() != b.index()) return false;
  if (auto* d = std::get_if<double>(&a)) return std::memcmp(d, &std::get<double>(b), sizeof(double)) == 0;
  return a == b;
}

struct Key {
  const UOp* node;
  bool operator==(const Key& o) const {
    const UOp& a = *node;
    const UOp& b = *o.node;
    if (a.hash != b.hash || a.op != b.op || a.dtype != b.dtype || a.shape != b.shape ||
        a.src.size() != b.src.size() || !arg_equal(a.arg, b.arg))
      return false;
    for (size_t i = 0; i < a.src.size(); ++i)
      if (a.src[i].get() != b.src[i].get()) return false;
    return true;
  }
};
struct KeyHash {
  size_t operator()(const Key& k) const { return k.node->hash; }
};

// The intern table maps structure to the live node. Entries are weak: a node that nobody holds
// dies, and its destructor removes the entry (only if the entry still names that node, since a
// concurrent factory call may already have replaced an expiring entry).
class InternTable {
 public:
  UOpRef intern(std::unique_ptr<UOp> fresh) {
    std::lock_guard lock(mu_);
    auto it = table_.find(Key{fresh.get()});
    if (it != table_.end()) {
      if (UOpRef alive = it->second.lock()) return alive;
      table_.erase(it);
    }
    UOpRef node(fresh.release());
    table_.emplace(Key{node.get()}, node);
    return node;
  }
  void forget(const UOp* node) {
    std::lock_guard lock(mu_);
    auto it = table_.find(Key{node});
    if (it != table_.end() && it->first.node == node) table_.erase(it);
  }

 private:
  std::mutex mu_;
  std::unordered_map<Key, std::weak_ptr<const UOp>, KeyHash> table_;
};

InternTable& intern_table() {
  static auto* table = new InternTable();  // never destroyed: UOps may die during static teardown
  return *table;
}

}  // namespace

UOp::~UOp() {
  intern_table().forget(this);
  // Destroy sources iteratively: releasing a long chain recursively would overflow the stack.
  thread_local std::vector<UOpRef> graveyard;
  thread_local bool draining = false;
  for (UOpRef& s : src)
    if (s.use_count() == 1) graveyard.push_back(std::move(s));
  if (draining) return;
  draining = true;
  while (!graveyard.empty()) {
    UOpRef last = std::move(graveyard.back());
    graveyard.pop_back();
    last.reset();
  }
  draining = false;
}

int64_t UOp::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string UOp::str() const {
  std::string s = absl::StrCat(op_name(op), " ", dtype_name(dtype));
  if (!shape.empty()) absl::StrAppend(&s, " (", absl::StrJoin(shape, ","), ")");
  if (auto* i = std::get_if<int64_t>(&arg)) absl::StrAppend(&s, " ", *i);
  if (auto* d = std::get_if<double>(&arg)) absl::StrAppend(&s, " ", *d);
  if (auto* v = std::get_if<std::vector<int64_t>>(&arg)) absl::StrAppend(&s, " [", absl::StrJoin(*v, ","), "]");
  if (auto* r = std::get_if<ReduceArg>(&arg))
    absl::StrAppend(&s, " ", op_name(r->op), " axes [", absl::StrJoin(r->axes, ","), "]");
  return s;
}

UOpRef uop(Ops op, DType dtype, std::vector<UOpRef> src, Arg arg, Shape shape) {
  uint64_t h = mix(mix(static_cast<uint64_t>(op), static_cast<uint64_t>(dtype)), hash_arg(arg));
  for (int64_t d : shape) h = mix(h, static_cast<uint64_t>(d));
  for (const UOpRef& s : src) h = mix(h, s->hash);
  auto fresh = std::unique_ptr<UOp>(new UOp{op, dtype, std::move(src), std::move(arg), std::move(shape), h, {}});
  fresh->extents = derive_extents(*fresh);
  return intern_table().intern(std::move(fresh));
}

UOpRef const_int(int64_t v, DType dt) { return uop(Ops::CONST, dt, {}, v); }

UOpRef const_float(double v, DType dt) { return uop(Ops::CONST, dt, {}, v); }

UOpRef const_like(DType dt, double v) {
  if (dtype_is_float(dt)) return const_float(v, dt);
  if (dt == DType::Bool) return const_int(v != 0, dt);
  return const_int(static_cast<int64_t>(v), dt);
}

std::vector<const UOp*> toposort(const std::vector<UOpRef>& roots) {
  std::vector<const UOp*> order;
  std::unordered_set<const UOp*> seen;
  // Iterative DFS: client graphs can be deeper than the thread stack allows recursion for.
  std::vector<std::pair<const UOp*, size_t>> stack;
  for (const UOpRef& r : roots) {
    if (!seen.insert(r.get()).second) continue;
    stack.emplace_back(r.get(), 0);
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next < node->src.size()) {
        const UOp* child = node->src[next++].get();
        if (seen.insert(child).second) stack.emplace_back(child, 0);
      } else {
        order.push_back(node);
        stack.pop_back();
      }
    }
  }
  return order;
}

bool reaches(const UOpRef& root, const UOp* target) {
  const std::vector<const UOp*> nodes = toposort({root});
  return std::find(nodes.begin(), nodes.end(), target) != nodes.end();
}

}  // namespace polygrad
