#include "core/frontend/tensor_ops.h"
#include "core/frontend/status_macros.h"
#include "core/ir/symbolic_dims.h"
#include "core/ir/wide_int.h"

#include <algorithm>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace polygrad::frontend {
namespace {

// A tensor of more elements than this cannot be indexed safely in 64-bit arithmetic
// with headroom; the server's own element limit is far smaller.
constexpr int64_t kMaxNumel = int64_t{1} << 50;

std::string shape_str(const Shape& s) { return absl::StrCat("(", absl::StrJoin(s, ", "), ")"); }

absl::Status check_shape(const Shape& shape) {
  i128 n = 1;
  for (int64_t d : shape) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat("negative dimension in shape ", shape_str(shape)));
    n *= d;
    if (n > kMaxNumel) return absl::InvalidArgumentError(absl::StrCat("shape ", shape_str(shape), " has too many elements"));
  }
  return absl::OkStatus();
}

absl::Status check_dtype(DType dt) {
  if (dt == DType::Void) return absl::InvalidArgumentError("void is not a tensor dtype");
  return absl::OkStatus();
}

absl::StatusOr<int64_t> normalize_axis(int64_t axis, size_t rank) {
  int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r)
    return absl::InvalidArgumentError(absl::StrCat("axis ", axis, " is out of range for rank ", rank));
  return axis < 0 ? axis + r : axis;
}

absl::StatusOr<std::vector<int64_t>> normalize_axes(std::vector<int64_t> axes, size_t rank, bool allow_dupes) {
  for (int64_t& a : axes) {
    auto n = normalize_axis(a, rank);
    if (!n.ok()) return n.status();
    a = *n;
  }
  std::sort(axes.begin(), axes.end());
  auto dup = std::adjacent_find(axes.begin(), axes.end());
  if (dup != axes.end()) {
    if (!allow_dupes) return absl::InvalidArgumentError(absl::StrCat("axis ", *dup, " is repeated"));
    axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  }
  return axes;
}

bool float_only(Ops op) {
  return op == Ops::FDIV || op == Ops::EXP2 || op == Ops::LOG2 || op == Ops::SQRT || op == Ops::RECIP ||
         op == Ops::SIN;
}

bool int_only(Ops op) { return op == Ops::IDIV || op == Ops::MOD; }

std::vector<int64_t> flatten(const Pairs& p) {
  std::vector<int64_t> out;
  for (auto [a, b] : p) {
    out.push_back(a);
    out.push_back(b);
  }
  return out;
}

size_t marks(const UOpRef& x) {
  return static_cast<size_t>(std::count_if(x->extents.begin(), x->extents.end(), [](const UOpRef& e) { return e != nullptr; }));
}

// `built` from `x` by `what`: refused when it would change one of x's symbolic axes other than as
// core/ir/symbolic_dims.h describes (the mark would be lost and a later reduction would read the
// invalid part).
absl::StatusOr<UOpRef> keeping_marks(const UOpRef& built, const UOpRef& x, const char* what) {
  if (x->extents.empty() || marks(built) >= marks(x)) return built;
  for (size_t a = 0; a < x->extents.size(); ++a) {
    const bool carried = built->op == Ops::RESHAPE ? reshaped_axis(x->shape, built->shape, a).has_value()
                                                   : a < built->extents.size() && built->extents[a];
    if (x->extents[a] && !carried)
      return absl::InvalidArgumentError(absl::StrCat(what, " ", shape_str(x->shape), " -> ", shape_str(built->shape),
                                                     " changes symbolic axis ", a,
                                                     ": a symbolic axis may be reshaped whole or merged with the axes "
                                                     "inside it, not split, padded, flipped or shrunk"));
  }
  return absl::InvalidArgumentError(absl::StrCat(what, " loses a symbolic axis of ", shape_str(x->shape)));
}

// The value a reduction with `op` starts from, as an unshaped constant of `dt`.
std::variant<int64_t, double> identity_of(Ops op, DType dt) {
  if (op == Ops::ADD) return int64_t{0};
  if (op == Ops::MUL) return int64_t{1};
  if (dtype_is_float(dt)) return -std::numeric_limits<double>::infinity();
  if (dt == DType::Bool || dtype_is_unsigned(dt)) return int64_t{0};
  return -(int64_t{1} << (8 * dtype_itemsize(dt) - 1));
}

}  // namespace

absl::StatusOr<UOpRef> buffer(uint64_t buffer_id, DType dtype, Shape shape) {
  if (auto s = check_dtype(dtype); !s.ok()) return s;
  if (auto s = check_shape(shape); !s.ok()) return s;
  return uop(Ops::BUFFER, dtype, {}, static_cast<int64_t>(buffer_id), std::move(shape));
}

absl::StatusOr<UOpRef> constant(std::variant<int64_t, double> value, DType dtype, Shape shape) {
  if (auto s = check_dtype(dtype); !s.ok()) return s;
  if (auto s = check_shape(shape); !s.ok()) return s;
  Arg arg;
  if (dtype_is_float(dtype)) {
    arg = std::holds_alternative<double>(value) ? std::get<double>(value)
                                                 : static_cast<double>(std::get<int64_t>(value));
  } else if (auto* d = std::get_if<double>(&value)) {
    if (!(*d >= -9.2e18 && *d <= 9.2e18))
      return absl::InvalidArgumentError(absl::StrCat("constant ", *d, " does not fit ", dtype_name(dtype)));
    arg = dtype == DType::Bool ? int64_t{*d != 0} : static_cast<int64_t>(*d);
  } else {
    int64_t v = std::get<int64_t>(value);
    arg = dtype == DType::Bool ? int64_t{v != 0} : v;
  }
  return uop(Ops::CONST, dtype, {}, std::move(arg), std::move(shape));
}

absl::StatusOr<UOpRef> arange(int64_t n, DType dtype) {
  if (auto s = check_dtype(dtype); !s.ok()) return s;
  if (dtype == DType::Bool) return absl::InvalidArgumentError("arange of bool");
  if (auto s = check_shape({n}); !s.ok()) return s;
  return uop(Ops::ARANGE, dtype, {}, {}, {n});
}

absl::StatusOr<UOpRef> alu(Ops op, const std::vector<UOpRef>& src) {
  size_t arity = is_unary_alu(op) ? 1 : is_binary_alu(op) ? 2 : op == Ops::WHERE ? 3 : 0;
  if (arity == 0 || op == Ops::CAST || op == Ops::BITCAST)
    return absl::InvalidArgumentError(absl::StrCat(op_name(op), " is not an elementwise op"));
  if (src.size() != arity)
    return absl::InvalidArgumentError(absl::StrCat(op_name(op), " takes ", arity, " sources, got ", src.size()));
  for (const UOpRef& s : src) {
    if (s->shape != src[0]->shape)
      return absl::InvalidArgumentError(absl::StrCat(op_name(op), " sources differ in shape: ", shape_str(src[0]->shape),
                                                     " vs ", shape_str(s->shape), " (broadcast explicitly)"));
  }
  size_t first_value = op == Ops::WHERE ? 1 : 0;
  DType dt = src[first_value]->dtype;
  for (size_t i = first_value; i < src.size(); ++i) {
    if (src[i]->dtype != dt)
      return absl::InvalidArgumentError(absl::StrCat(op_name(op), " sources differ in dtype: ", dtype_name(dt), " vs ",
                                                     dtype_name(src[i]->dtype), " (cast explicitly)"));
  }
  if (op == Ops::WHERE && src[0]->dtype != DType::Bool)
    return absl::InvalidArgumentError(absl::StrCat("WHERE condition must be bool, got ", dtype_name(src[0]->dtype)));
  if (float_only(op) && !dtype_is_float(dt))
    return absl::InvalidArgumentError(absl::StrCat(op_name(op), " needs a float dtype, got ", dtype_name(dt)));
  if (int_only(op) && !dtype_is_int(dt))
    return absl::InvalidArgumentError(absl::StrCat(op_name(op), " needs an integer dtype, got ", dtype_name(dt)));
  if ((op == Ops::AND || op == Ops::OR || op == Ops::XOR) && dtype_is_float(dt))
    return absl::InvalidArgumentError(absl::StrCat(op_name(op), " needs an integer or bool dtype, got ", dtype_name(dt)));
  if (op == Ops::NOT && dt != DType::Bool)
    return absl::InvalidArgumentError(absl::StrCat("NOT needs a bool dtype, got ", dtype_name(dt)));
  if (op == Ops::NEG && dt == DType::Bool) return absl::InvalidArgumentError("NEG of bool: use NOT");
  DType out = (op == Ops::CMPLT || op == Ops::CMPNE) ? DType::Bool : dt;
  return uop(op, out, src, {}, src[0]->shape);
}

absl::StatusOr<UOpRef> cast(const UOpRef& x, DType dtype) {
  if (auto s = check_dtype(dtype); !s.ok()) return s;
  if (x->dtype == dtype) return x;
  return uop(Ops::CAST, dtype, {x}, {}, x->shape);
}

DType uint_of_size(size_t bytes) {
  return bytes == 1 ? DType::UInt8 : bytes == 2 ? DType::UInt16 : bytes == 4 ? DType::UInt32 : DType::UInt64;
}

namespace {

// The bytes of unsigned `u` regrouped along its last axis into unsigned `to` of another size,
// in the little-endian order of the buffers: a wide element splits into r narrow ones, part k
// being u / 256^(k*narrow) truncated to `to`; r narrow elements join into the sum of
// part_k * 256^(k*narrow) (the parts' bits are disjoint, so the sum is exact). Each part is its
// own slice (PAD or SHRINK), so everything stays elementwise with constant divisors: one fused
// kernel, no reduction.
absl::StatusOr<UOpRef> regroup_bytes(const UOpRef& u, DType to) {
  size_t from_size = dtype_itemsize(u->dtype), to_size = dtype_itemsize(to);
  bool split = to_size < from_size;
  DType wide = split ? u->dtype : to;
  int64_t r = static_cast<int64_t>(split ? from_size / to_size : to_size / from_size);
  int64_t narrow_bits = 8 * static_cast<int64_t>(split ? to_size : from_size);
  const Shape& shape = u->shape;
  size_t rank = shape.size();
  Shape outer(shape.begin(), shape.end() - 1);
  int64_t last = shape.back();
  Shape grouped = outer;
  grouped.insert(grouped.end(), {split ? last : last / r, split ? int64_t{1} : r});
  Shape out = outer;
  out.push_back(split ? last * r : last / r);
  PG_ASSIGN(parts, reshape(u, grouped));
  UOpRef sum;
  for (int64_t k = 0; k < r; ++k) {
    UOpRef term;
    if (split) {
      PG_ASSIGN(place, constant(int64_t{1} << (narrow_bits * k), wide, grouped));
      PG_ASSIGN(shifted, alu(Ops::IDIV, {parts, place}));
      PG_ASSIGN(part, cast(shifted, to));
      Pairs widen(rank + 1, {0, 0});
      widen.back() = {k, r - 1 - k};
      PG_ASSIGN(lane, pad(part, widen));
      term = lane;
    } else {
      Pairs slice;
      for (int64_t d : grouped) slice.emplace_back(0, d);
      slice.back() = {k, k + 1};
      PG_ASSIGN(lane, shrink(parts, slice));
      PG_ASSIGN(widened, cast(lane, to));
      PG_ASSIGN(place, constant(int64_t{1} << (narrow_bits * k), wide, widened->shape));
      PG_ASSIGN(placed, alu(Ops::MUL, {widened, place}));
      term = placed;
    }
    if (!sum) {
      sum = term;
      continue;
    }
    PG_ASSIGN(next, alu(Ops::ADD, {sum, term}));
    sum = next;
  }
  return reshape(sum, out);
}

}  // namespace

absl::StatusOr<UOpRef> bitcast(const UOpRef& x, DType dtype) {
  if (auto s = check_dtype(dtype); !s.ok()) return s;
  if (x->dtype == dtype) return x;
  size_t from = dtype_itemsize(x->dtype), to = dtype_itemsize(dtype);
  if (from != to) {
    std::string what = absl::StrCat("bitcast from ", dtype_name(x->dtype), " (", from, " bytes) to ",
                                    dtype_name(dtype), " (", to, " bytes)");
    if (x->shape.empty())
      return absl::InvalidArgumentError(absl::StrCat(what, " of a 0-d tensor: differing itemsizes need a last axis"));
    if (to > from && x->shape.back() % static_cast<int64_t>(to / from) != 0)
      return absl::InvalidArgumentError(absl::StrCat(what, ": the last axis (", x->shape.back(),
                                                     ") must be a multiple of ", to / from));
    PG_ASSIGN(u, bitcast(x, uint_of_size(from)));
    PG_ASSIGN(regrouped, regroup_bytes(u, uint_of_size(to)));
    return bitcast(regrouped, dtype);
  }
  // Converting between integers of one size keeps the bits (gcc, clang and NVRTC define the
  // out-of-range signed case as two's complement wrapping), so only a float needs BITCAST.
  if (!dtype_is_float(x->dtype) && !dtype_is_float(dtype)) return cast(x, dtype);
  return uop(Ops::BITCAST, dtype, {x}, {}, x->shape);
}

absl::StatusOr<UOpRef> reduce(Ops op, const UOpRef& x, std::vector<int64_t> axes) {
  if (op != Ops::ADD && op != Ops::MAX && op != Ops::MUL)
    return absl::InvalidArgumentError(absl::StrCat("reduction with ", op_name(op), " is not supported"));
  if (op != Ops::MAX && x->dtype == DType::Bool)
    return absl::InvalidArgumentError(absl::StrCat(op == Ops::ADD ? "sum" : "product",
                                                   " of a bool tensor: cast it to an integer dtype first"));
  auto norm = normalize_axes(std::move(axes), x->shape.size(), false);
  if (!norm.ok()) return norm.status();
  Shape out = x->shape;
  for (int64_t a : *norm) out[a] = 1;
  if (norm->empty()) return x;
  UOpRef src = x;
  for (int64_t a : *norm) {
    if (x->extents.empty() || !x->extents[a]) continue;
    PG_ASSIGN(masked, past_extent(src, a, identity_of(op, x->dtype)));
    src = masked;
  }
  return uop(Ops::REDUCE_AXIS, x->dtype, {src}, ReduceArg{op, *norm}, std::move(out));
}

absl::StatusOr<UOpRef> past_extent(const UOpRef& x, int64_t axis, std::variant<int64_t, double> fill) {
  const UOpRef& extent = x->extents.at(axis);
  Shape along(x->shape.size(), 1);
  along[axis] = x->shape[axis];
  PG_ASSIGN(positions, arange(x->shape[axis], DType::Int32));
  PG_ASSIGN(positions_along, reshape(positions, along));
  PG_ASSIGN(at, expand(positions_along, x->shape));
  PG_ASSIGN(extent_one, reshape(extent, Shape(x->shape.size(), 1)));
  PG_ASSIGN(limit, expand(extent_one, x->shape));
  PG_ASSIGN(valid, alu(Ops::CMPLT, {at, limit}));
  PG_ASSIGN(filler, constant(fill, x->dtype, x->shape));
  return alu(Ops::WHERE, {valid, x, filler});
}

absl::StatusOr<UOpRef> bound(const UOpRef& x, int64_t axis, const UOpRef& extent) {
  auto a = normalize_axis(axis, x->shape.size());
  if (!a.ok()) return a.status();
  if (extent->dtype != DType::Int32 || !extent->shape.empty())
    return absl::InvalidArgumentError(absl::StrCat("a symbolic dim's extent is a 0-d int32 tensor, got ", dtype_name(extent->dtype),
                                                   " ", shape_str(extent->shape)));
  if (!extent->extents.empty()) return absl::InvalidArgumentError("a symbolic dim's extent has a symbolic dim itself");
  return uop(Ops::BOUND, x->dtype, {x, extent}, *a, x->shape);
}

absl::StatusOr<UOpRef> gather_last(const UOpRef& x, const UOpRef& index) {
  if (!dtype_is_int(index->dtype))
    return absl::InvalidArgumentError(absl::StrCat("gather needs integer indices, got ", dtype_name(index->dtype)));
  if (x->shape.empty() || index->shape.size() != x->shape.size() ||
      !std::equal(x->shape.begin(), x->shape.end() - 1, index->shape.begin()))
    return absl::InvalidArgumentError(absl::StrCat("gather: index ", shape_str(index->shape), " must have the leading axes of ",
                                                   shape_str(x->shape)));
  UOpRef built = uop(Ops::GATHER, x->dtype, {x, index}, {}, index->shape);
  if (absl::Status s = keeping_marks(built, index, "gather").status(); !s.ok()) return s;
  return keeping_marks(built, x, "gather");
}

absl::StatusOr<UOpRef> slice_at(const UOpRef& x, int64_t axis, const UOpRef& begin, int64_t count) {
  const auto rank = static_cast<int64_t>(x->shape.size());
  if (axis < 0 || axis >= rank)
    return absl::InvalidArgumentError(absl::StrCat("slice_at: axis ", axis, " is out of range for rank ", rank));
  if (begin->dtype != DType::Int32 || !begin->shape.empty())
    return absl::InvalidArgumentError("slice_at: the begin must be a 0-d int32 tensor");
  if (count < 0 || count > x->shape[axis])
    return absl::InvalidArgumentError(absl::StrCat("slice_at: ", count, " elements of an axis of size ", x->shape[axis]));
  const std::vector<int64_t> order = axis_last_permutation(x->shape.size(), axis);
  PG_ASSIGN(last, permute(x, order));
  // index[..., j] = begin + j
  PG_ASSIGN(positions, arange(count, DType::Int32));
  PG_ASSIGN(one, reshape(begin, {1}));
  PG_ASSIGN(from, expand(one, {count}));
  PG_ASSIGN(at, alu(Ops::ADD, {positions, from}));
  Shape row(last->shape.size(), 1), index_shape = last->shape;
  row.back() = index_shape.back() = count;
  PG_ASSIGN(shaped, reshape(at, row));
  PG_ASSIGN(index, expand(shaped, index_shape));
  PG_ASSIGN(picked, gather_last(last, index));
  return permute(picked, inverse_permutation(order));
}

absl::StatusOr<UOpRef> reshape(const UOpRef& x, Shape shape) {
  if (auto s = check_shape(shape); !s.ok()) return s;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (n != x->numel())
    return absl::InvalidArgumentError(absl::StrCat("cannot reshape ", shape_str(x->shape), " (", x->numel(),
                                                   " elements) to ", shape_str(shape), " (", n, " elements)"));
  if (shape == x->shape) return x;
  std::vector<int64_t> arg = shape;
  return keeping_marks(uop(Ops::RESHAPE, x->dtype, {x}, std::move(arg), std::move(shape)), x, "reshape");
}

absl::StatusOr<UOpRef> permute(const UOpRef& x, std::vector<int64_t> order) {
  if (order.size() != x->shape.size())
    return absl::InvalidArgumentError(absl::StrCat("permutation of ", order.size(), " axes for a tensor of rank ", x->shape.size()));
  for (int64_t& a : order) {
    auto n = normalize_axis(a, x->shape.size());
    if (!n.ok()) return n.status();
    a = *n;
  }
  std::vector<int64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] != static_cast<int64_t>(i))
      return absl::InvalidArgumentError(absl::StrCat("(", absl::StrJoin(order, ", "), ") is not a permutation"));
  bool identity = true;
  Shape out;
  for (size_t i = 0; i < order.size(); ++i) {
    out.push_back(x->shape[order[i]]);
    identity &= order[i] == static_cast<int64_t>(i);
  }
  if (identity) return x;
  return uop(Ops::PERMUTE, x->dtype, {x}, std::move(order), std::move(out));
}

absl::StatusOr<UOpRef> expand(const UOpRef& x, Shape shape) {
  if (auto s = check_shape(shape); !s.ok()) return s;
  if (shape.size() != x->shape.size())
    return absl::InvalidArgumentError(absl::StrCat("cannot expand ", shape_str(x->shape), " to ", shape_str(shape),
                                                   ": ranks differ (reshape first)"));
  for (size_t i = 0; i < shape.size(); ++i)
    if (x->shape[i] != shape[i] && x->shape[i] != 1)
      return absl::InvalidArgumentError(absl::StrCat("cannot expand ", shape_str(x->shape), " to ", shape_str(shape),
                                                     ": axis ", i, " has size ", x->shape[i], ", not 1"));
  if (shape == x->shape) return x;
  std::vector<int64_t> arg = shape;
  return uop(Ops::EXPAND, x->dtype, {x}, std::move(arg), std::move(shape));
}

absl::StatusOr<UOpRef> pad(const UOpRef& x, const Pairs& before_after) {
  if (before_after.size() != x->shape.size())
    return absl::InvalidArgumentError(absl::StrCat("pad needs ", x->shape.size(), " (before, after) pairs, got ", before_after.size()));
  Shape out = x->shape;
  bool noop = true;
  for (size_t i = 0; i < out.size(); ++i) {
    auto [b, a] = before_after[i];
    if (b < 0 || a < 0)
      return absl::InvalidArgumentError(absl::StrCat("pad amounts must be >= 0, got (", b, ", ", a, ") on axis ", i));
    out[i] += b + a;
    noop &= b == 0 && a == 0;
  }
  if (auto s = check_shape(out); !s.ok()) return s;
  if (noop) return x;
  return keeping_marks(uop(Ops::PAD, x->dtype, {x}, flatten(before_after), std::move(out)), x, "pad");
}

absl::StatusOr<UOpRef> shrink(const UOpRef& x, const Pairs& begin_end) {
  if (begin_end.size() != x->shape.size())
    return absl::InvalidArgumentError(absl::StrCat("shrink needs ", x->shape.size(), " (begin, end) pairs, got ", begin_end.size()));
  Shape out;
  bool noop = true;
  for (size_t i = 0; i < begin_end.size(); ++i) {
    auto [b, e] = begin_end[i];
    if (b < 0 || b > e || e > x->shape[i])
      return absl::InvalidArgumentError(absl::StrCat("shrink (", b, ", ", e, ") is out of range for axis ", i,
                                                     " of size ", x->shape[i]));
    out.push_back(e - b);
    noop &= b == 0 && e == x->shape[i];
  }
  if (noop) return x;
  return keeping_marks(uop(Ops::SHRINK, x->dtype, {x}, flatten(begin_end), std::move(out)), x, "shrink");
}

absl::StatusOr<UOpRef> flip(const UOpRef& x, std::vector<int64_t> axes) {
  auto norm = normalize_axes(std::move(axes), x->shape.size(), false);
  if (!norm.ok()) return norm.status();
  std::erase_if(*norm, [&](int64_t a) { return x->shape[a] <= 1; });
  if (norm->empty()) return x;
  return keeping_marks(uop(Ops::FLIP, x->dtype, {x}, *norm, x->shape), x, "flip");
}

absl::StatusOr<UOpRef> copy(const UOpRef& x, int64_t device_code) {
  if (device_code < 0) return absl::InvalidArgumentError(absl::StrCat("copy: device code ", device_code, " is negative"));
  return keeping_marks(uop(Ops::COPY, x->dtype, {x}, device_code, x->shape), x, "copy");
}

UOpRef copy_to_device_of(const UOpRef& x, const UOpRef& like) {
  return uop(Ops::COPY, x->dtype, {x, like}, kCopyToSourceDevice, x->shape);
}

std::vector<int64_t> axis_last_permutation(size_t rank, int64_t axis) {
  std::vector<int64_t> p;
  for (size_t i = 0; i < rank; ++i)
    if (static_cast<int64_t>(i) != axis) p.push_back(static_cast<int64_t>(i));
  p.push_back(axis);
  return p;
}

std::vector<int64_t> inverse_permutation(const std::vector<int64_t>& p) {
  std::vector<int64_t> inv(p.size());
  for (size_t i = 0; i < p.size(); ++i) inv[p[i]] = static_cast<int64_t>(i);
  return inv;
}

}  // namespace polygrad::frontend
