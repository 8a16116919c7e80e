#include "core/codegen/lower.h"

#include <algorithm>

#include <map>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace polygrad {
namespace {

// Kernel graphs deeper than this are refused rather than risk the thread's stack.
constexpr int kMaxDepth = 4000;

std::vector<int64_t> strides_of(const Shape& shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) st[i - 1] = st[i] * shape[i];
  return st;
}

UOpRef add(const UOpRef& a, const UOpRef& b) { return uop(Ops::ADD, kIndexDType, {a, b}); }
UOpRef mul(const UOpRef& a, int64_t c) { return uop(Ops::MUL, kIndexDType, {a, const_int(c)}); }
UOpRef lt(const UOpRef& a, const UOpRef& b) { return uop(Ops::CMPLT, DType::Bool, {a, b}); }
UOpRef land(const UOpRef& a, const UOpRef& b) {
  if (!a) return b;
  return uop(Ops::AND, DType::Bool, {a, b});
}

UOpRef linear_index(const std::vector<UOpRef>& idx, const Shape& shape) {
  std::vector<int64_t> st = strides_of(shape);
  UOpRef out = const_int(0);
  for (size_t i = 0; i < idx.size(); ++i)
    if (shape[i] != 1) out = add(out, mul(idx[i], st[i]));
  return out;
}

class Lowerer {
 public:
  Lowerer(const UOpRef& root, const std::function<bool(const UOp*)>& materialized, bool flat_output,
          int64_t output_tile)
      : root_(root), materialized_(materialized), flat_output_(flat_output), output_tile_(output_tile) {}

  absl::StatusOr<KernelAst> run() {
    const Shape& shape = root_->shape;
    if (flat_output_ && output_tile_ > 0) {
      std::vector<size_t> long_axes;
      for (size_t i = 0; i < shape.size(); ++i)
        if (shape[i] != 1) long_axes.push_back(i);
      if (long_axes.size() >= 2 && shape[long_axes.back()] % output_tile_ == 0 &&
          shape[long_axes[long_axes.size() - 2]] % output_tile_ == 0)
        return tiled(long_axes[long_axes.size() - 2], long_axes.back());
    }
    if (flat_output_ && std::count_if(shape.begin(), shape.end(), [](int64_t d) { return d != 1; }) > 1) {
      UOpRef flat = range(0, root_->numel());
      next_range_ = 1;
      UOpRef out = param(root_.get());
      UOpRef value = lower_flat(root_, flat, nullptr, 0);
      if (!status_.ok()) return status_;
      return KernelAst{uop(Ops::SINK, DType::Void, {uop(Ops::STORE, DType::Void, {out, flat, value})}), params_};
    }
    UOpRef out = param(root_.get());  // parameter 0, before a stop's loads
    std::vector<UOpRef> idx;
    for (size_t i = 0; i < shape.size(); ++i)
      idx.push_back(shape[i] == 1 ? const_int(0) : range(static_cast<int64_t>(i), shape[i], stop_of(*root_, i, 0)));
    next_range_ = static_cast<int64_t>(shape.size());
    UOpRef value = lower(root_, idx, nullptr, 0);
    if (!status_.ok()) return status_;
    UOpRef store = uop(Ops::STORE, DType::Void, {out, linear_index(idx, shape), value});
    return KernelAst{uop(Ops::SINK, DType::Void, {store}), params_};
  }

 private:
  // A loop over [0, end); with `stop` (an index expression computed before any loop) the loop may
  // also end at `stop`: what lies past it is masked off anyway (a symbolic dim's extent), so
  // the renderer may bound the loop there or not (core/ir/symbolic_dims.h).
  UOpRef range(int64_t id, int64_t end, const UOpRef& stop = nullptr) {
    if (!stop) return uop(Ops::RANGE, kIndexDType, {const_int(end)}, id);
    return uop(Ops::RANGE, kIndexDType, {const_int(end), stop}, id);
  }

  // Where a loop over `axis` of `n` may stop: its symbolic dim's extent, or null. Not for a GPU
  // (flat_output): its renderer spreads reductions over a warp's lanes and has no use for it.
  UOpRef stop_of(const UOp& n, size_t axis, int depth) {
    if (flat_output_ || n.extents.empty() || !n.extents[axis]) return nullptr;
    UOpRef e = lower(n.extents[axis], {}, nullptr, depth);
    return e->dtype == kIndexDType ? e : uop(Ops::CAST, kIndexDType, {e});
  }

  // The output in tiles over axes `rows` and `cols` (run() checked they divide): range 0 numbers
  // the tiles, then the other axes last to first; ranges 1 and 2 are the tile's row and column.
  // Within one position of the other axes, tiles go columns fastest — and when both tile counts
  // divide by kSquare, each run of kSquare^2 consecutive tile numbers is a kSquare x kSquare square
  // of tiles (columns fastest inside it too): the threads of a GPU block of that many then share
  // kSquare rows and kSquare columns of tiles, so each operand element they load is used by
  // kSquare of them, where a strip of tiles along one row would share only its rows.
  absl::StatusOr<KernelAst> tiled(size_t rows, size_t cols) {
    constexpr int64_t kSquare = 16;
    const Shape& shape = root_->shape;
    const int64_t t = output_tile_, tile_rows = shape[rows] / t, tile_cols = shape[cols] / t;
    UOpRef tile = range(0, root_->numel() / (t * t));
    UOpRef row = range(1, t), col = range(2, t);
    next_range_ = 3;
    // The next digit of `rest` in base `size` (all of it when `last`), and `rest` without it.
    auto split = [&](UOpRef& rest, int64_t size, bool last) {
      UOpRef here = last ? rest : uop(Ops::MOD, kIndexDType, {rest, const_int(size)});
      if (!last) rest = uop(Ops::IDIV, kIndexDType, {rest, const_int(size)});
      return here;
    };
    std::vector<size_t> others;
    for (size_t i = shape.size(); i-- > 0;)
      if (i != rows && i != cols && shape[i] != 1) others.push_back(i);
    UOpRef rest = tile, tile_row, tile_col;
    const bool squares = tile_rows % kSquare == 0 && tile_cols % kSquare == 0;
    if (squares) {
      UOpRef in_col = split(rest, kSquare, false), in_row = split(rest, kSquare, false);
      UOpRef square_col = split(rest, tile_cols / kSquare, false);
      UOpRef square_row = split(rest, tile_rows / kSquare, others.empty());
      tile_col = add(mul(square_col, kSquare), in_col);
      tile_row = add(mul(square_row, kSquare), in_row);
    } else {
      tile_col = split(rest, tile_cols, false);
      tile_row = split(rest, tile_rows, others.empty());
    }
    std::vector<UOpRef> idx(shape.size(), const_int(0));
    idx[cols] = add(mul(tile_col, t), col);
    idx[rows] = add(mul(tile_row, t), row);
    for (size_t k = 0; k < others.size(); ++k) idx[others[k]] = split(rest, shape[others[k]], k + 1 == others.size());
    UOpRef out = param(root_.get());
    UOpRef value = lower(root_, idx, nullptr, 0);
    if (!status_.ok()) return status_;
    UOpRef store = uop(Ops::STORE, DType::Void, {out, linear_index(idx, shape), value});
    return KernelAst{uop(Ops::SINK, DType::Void, {store}), params_, {1, 2}, squares ? kSquare : 0};
  }

  UOpRef param(const UOp* node) {
    auto [it, fresh] = param_index_.emplace(node, static_cast<int64_t>(params_.size()));
    if (fresh) params_.push_back(node);
    return uop(Ops::DEFINE_GLOBAL, node->dtype, {}, it->second);
  }

  UOpRef lower(const UOpRef& node, const std::vector<UOpRef>& idx, const UOpRef& valid, int depth) {
    if (depth > kMaxDepth) {
      if (status_.ok())
        status_ = absl::ResourceExhaustedError(absl::StrCat("graph depth inside one kernel exceeds the limit of ", kMaxDepth));
      return const_int(0);
    }
    std::vector<const UOp*> key{node.get(), valid.get()};
    for (const UOpRef& i : idx) key.push_back(i.get());
    // Keys hold raw pointers: keep their nodes alive so no address is reused meanwhile.
    keep_.insert(keep_.end(), idx.begin(), idx.end());
    keep_.push_back(valid);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    UOpRef out = lower_uncached(node, idx, valid, depth + 1);
    memo_.emplace(std::move(key), out);
    return out;
  }

  UOpRef lower_uncached(const UOpRef& node, const std::vector<UOpRef>& idx, const UOpRef& valid, int depth) {
    const UOp& n = *node;
    if (node != root_ && materialized_(node.get())) {
      std::vector<UOpRef> src{param(node.get()), linear_index(idx, n.shape)};
      if (valid) src.push_back(valid);
      return uop(Ops::LOAD, n.dtype, std::move(src));
    }
    auto sub = [&](const std::vector<UOpRef>& i, const UOpRef& v) { return lower(n.src[0], i, v, depth); };
    const Shape& in = n.src.empty() ? n.shape : n.src[0]->shape;
    switch (n.op) {
      case Ops::CONST:
        return uop(Ops::CONST, n.dtype, {}, n.arg);
      case Ops::ARANGE:
        return n.dtype == kIndexDType ? idx[0] : uop(Ops::CAST, n.dtype, {idx[0]});
      case Ops::RESHAPE:
        return lower_flat(n.src[0], linear_index(idx, n.shape), valid, depth);
      case Ops::PERMUTE: {
        std::vector<UOpRef> out(idx.size());
        const auto& order = n.arg_ints();
        for (size_t i = 0; i < order.size(); ++i) out[order[i]] = idx[i];
        return sub(out, valid);
      }
      case Ops::EXPAND: {
        std::vector<UOpRef> out = idx;
        for (size_t i = 0; i < in.size(); ++i)
          if (in[i] == 1) out[i] = const_int(0);
        return sub(out, valid);
      }
      case Ops::SHRINK: {
        std::vector<UOpRef> out = idx;
        const auto& be = n.arg_ints();
        for (size_t i = 0; i < in.size(); ++i) out[i] = add(idx[i], const_int(be[2 * i]));
        return sub(out, valid);
      }
      case Ops::BOUND:
        return sub(idx, valid);
      case Ops::FLIP: {
        std::vector<UOpRef> out = idx;
        for (int64_t a : n.arg_ints()) out[a] = uop(Ops::SUB, kIndexDType, {const_int(in[a] - 1), idx[a]});
        return sub(out, valid);
      }
      case Ops::PAD: {
        std::vector<UOpRef> out = idx;
        const auto& ba = n.arg_ints();
        UOpRef inside;
        for (size_t i = 0; i < in.size(); ++i) {
          int64_t before = ba[2 * i];
          if (ba[2 * i] == 0 && ba[2 * i + 1] == 0) continue;
          out[i] = uop(Ops::SUB, kIndexDType, {idx[i], const_int(before)});
          inside = land(inside, lt(const_int(before - 1), idx[i]));
          inside = land(inside, lt(idx[i], const_int(before + in[i])));
        }
        UOpRef v = sub(out, land(valid, inside));
        return uop(Ops::WHERE, n.dtype, {inside, v, const_like(n.dtype, 0)});
      }
      case Ops::GATHER: {
        // The index's value at this position picks the element along x's last axis; outside
        // [0, n) the load is masked off (and its address kept in range) and the result is 0.
        UOpRef at = lower(n.src[1], idx, valid, depth);
        if (at->dtype != kIndexDType) at = uop(Ops::CAST, kIndexDType, {at});
        UOpRef inside = land(lt(const_int(-1), at), lt(at, const_int(in.back())));
        std::vector<UOpRef> out = idx;
        out.back() = uop(Ops::WHERE, kIndexDType, {inside, at, const_int(0)});
        UOpRef v = sub(out, land(valid, inside));
        return uop(Ops::WHERE, n.dtype, {inside, v, const_like(n.dtype, 0)});
      }
      case Ops::REDUCE_AXIS: {
        const ReduceArg& r = n.arg_reduce();
        std::vector<UOpRef> out = idx, ranges;
        for (int64_t a : r.axes) {
          if (in[a] == 1) {
            out[a] = const_int(0);
          } else {
            out[a] = range(next_range_++, in[a], stop_of(*n.src[0], static_cast<size_t>(a), depth));
            ranges.push_back(out[a]);
          }
        }
        UOpRef v = sub(out, valid);
        if (ranges.empty()) return v;
        std::vector<UOpRef> src{v};
        src.insert(src.end(), ranges.begin(), ranges.end());
        return uop(Ops::REDUCE, n.dtype, std::move(src), static_cast<int64_t>(r.op));
      }
      case Ops::BUFFER:
        status_ = absl::InternalError("an unbound buffer reached the lowerer");
        return const_int(0);
      default:
        break;
    }
    if (is_alu(n.op)) {
      std::vector<UOpRef> src;
      for (const UOpRef& s : n.src) src.push_back(lower(s, idx, valid, depth));
      return uop(n.op, n.dtype, std::move(src));
    }
    status_ = absl::InternalError(absl::StrCat("cannot lower ", op_name(n.op)));
    return const_int(0);
  }

  // Lowers `node` at a row-major flat index. Reshapes, loads and elementwise ops need no
  // per-axis index, so chains of them keep the flat index as it is (no div/mod at all); anything
  // else gets the flat index split into the node's axes.
  UOpRef lower_flat(const UOpRef& node, const UOpRef& flat, const UOpRef& valid, int depth) {
    // Memoized like lower(): a node reached along several paths (x in both branches of a WHERE,
    // a shared subexpression) is lowered once, not once per path, which is exponential in the
    // depth of such sharing (tanh through expm1 never finished). nullptr marks the flat index.
    std::vector<const UOp*> key{node.get(), valid.get(), nullptr, flat.get()};
    keep_.push_back(flat);
    keep_.push_back(valid);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    UOpRef out = lower_flat_uncached(node, flat, valid, depth);
    memo_.emplace(std::move(key), out);
    return out;
  }

  UOpRef lower_flat_uncached(const UOpRef& node, const UOpRef& flat, const UOpRef& valid, int depth) {
    const UOp& n = *node;
    bool loaded = node != root_ && materialized_(node.get());
    if (!loaded && n.op == Ops::RESHAPE) return lower_flat(n.src[0], flat, valid, depth + 1);
    if (!loaded && (is_alu(n.op) || n.op == Ops::CONST)) {
      if (n.op == Ops::CONST) return uop(Ops::CONST, n.dtype, {}, n.arg);
      std::vector<UOpRef> src;
      for (const UOpRef& s : n.src) src.push_back(lower_flat(s, flat, valid, depth + 1));
      return uop(n.op, n.dtype, std::move(src));
    }
    if (loaded) {
      std::vector<UOpRef> src{param(node.get()), flat};
      if (valid) src.push_back(valid);
      return uop(Ops::LOAD, n.dtype, std::move(src));
    }
    std::vector<int64_t> st = strides_of(n.shape);
    std::vector<UOpRef> idx;
    for (size_t i = 0; i < n.shape.size(); ++i) {
      if (n.shape[i] == 1) {
        idx.push_back(const_int(0));
        continue;
      }
      UOpRef q = uop(Ops::IDIV, kIndexDType, {flat, const_int(st[i])});
      idx.push_back(i == 0 ? q : uop(Ops::MOD, kIndexDType, {q, const_int(n.shape[i])}));
    }
    return lower(node, idx, valid, depth + 1);
  }

  UOpRef root_;
  const std::function<bool(const UOp*)>& materialized_;
  const bool flat_output_;
  const int64_t output_tile_;
  std::vector<const UOp*> params_;
  std::unordered_map<const UOp*, int64_t> param_index_;
  std::map<std::vector<const UOp*>, UOpRef> memo_;
  std::vector<UOpRef> keep_;
  int64_t next_range_ = 0;
  absl::Status status_;
};

}  // namespace

absl::StatusOr<KernelAst> lower_kernel(const UOpRef& root, const std::function<bool(const UOp*)>& materialized,
                                       bool flat_output, int64_t output_tile) {
  return Lowerer(root, materialized, flat_output, output_tile).run();
}

}  // namespace polygrad
