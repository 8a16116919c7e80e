#include "core/ir/symbolic_dims.h"

#include <algorithm>

namespace polygrad {
namespace {

bool marked(const std::vector<UOpRef>& extents) {
  return std::any_of(extents.begin(), extents.end(), [](const UOpRef& e) { return e != nullptr; });
}

std::vector<UOpRef> or_empty(std::vector<UOpRef> extents) { return marked(extents) ? extents : std::vector<UOpRef>{}; }

// The source's extents, one per axis (nulls when it has none).
std::vector<UOpRef> of(const UOp& src) {
  return src.extents.empty() ? std::vector<UOpRef>(src.shape.size()) : src.extents;
}

}  // namespace

std::optional<ReshapedAxis> reshaped_axis(const Shape& in, const Shape& out, size_t axis) {
  int64_t before = 1;
  for (size_t i = 0; i < axis; ++i) before *= in[i];
  int64_t out_before = 1;
  for (size_t j = 0; j < out.size(); ++j) {
    if (out_before == before && out[j] != 1) {
      // The output axis starting where `axis` starts: `axis` alone, or `axis` and the inner
      // axes whose sizes make up the rest of it.
      int64_t size = in[axis], factor = 1;
      for (size_t i = axis + 1; size < out[j] && i < in.size(); ++i) {
        size *= in[i];
        factor *= in[i];
      }
      if (size == out[j]) return ReshapedAxis{j, factor};
      return std::nullopt;
    }
    if (out_before > before) break;
    out_before *= out[j];
  }
  return std::nullopt;
}

UOpRef scale_extent(const UOpRef& e, int64_t factor) {
  if (factor == 1) return e;
  return uop(Ops::MUL, DType::Int32, {e, uop(Ops::CONST, DType::Int32, {}, factor)});
}

std::vector<UOpRef> derive_extents(const UOp& n) {
  if (n.op == Ops::BOUND) {
    std::vector<UOpRef> out = of(*n.src[0]);
    const UOpRef& e = n.src[1];
    const bool whole = e->op == Ops::CONST && e->arg_int() >= n.shape[n.arg_int()];
    out[n.arg_int()] = whole ? nullptr : e;
    return or_empty(std::move(out));
  }
  if (std::none_of(n.src.begin(), n.src.end(), [](const UOpRef& s) { return !s->extents.empty(); })) return {};
  const size_t rank = n.shape.size();
  if (is_alu(n.op)) {
    std::vector<UOpRef> out(rank);
    for (const UOpRef& s : n.src) {
      if (s->extents.size() != rank) continue;
      for (size_t a = 0; a < rank; ++a)
        if (!out[a]) out[a] = s->extents[a];
    }
    return or_empty(std::move(out));
  }
  const Shape& in = n.src[0]->shape;
  std::vector<UOpRef> src = of(*n.src[0]);
  switch (n.op) {
    case Ops::REDUCE_AXIS:
      for (int64_t a : n.arg_reduce().axes) src[a] = nullptr;
      return or_empty(std::move(src));
    case Ops::EXPAND:
      return src;
    case Ops::PERMUTE: {
      std::vector<UOpRef> out(rank);
      const auto& order = n.arg_ints();
      for (size_t i = 0; i < rank; ++i) out[i] = src[order[i]];
      return or_empty(std::move(out));
    }
    case Ops::RESHAPE: {
      std::vector<UOpRef> out(rank);
      for (size_t a = 0; a < src.size(); ++a) {
        if (!src[a]) continue;
        if (std::optional<ReshapedAxis> r = reshaped_axis(in, n.shape, a)) out[r->axis] = scale_extent(src[a], r->factor);
      }
      return or_empty(std::move(out));
    }
    case Ops::SHRINK:
    case Ops::PAD: {
      const auto& pairs = n.arg_ints();
      for (size_t a = 0; a < src.size(); ++a) {
        const bool whole = n.op == Ops::SHRINK ? pairs[2 * a] == 0 && pairs[2 * a + 1] == in[a]
                                               : pairs[2 * a] == 0 && pairs[2 * a + 1] == 0;
        if (!whole) src[a] = nullptr;
      }
      return or_empty(std::move(src));
    }
    case Ops::FLIP:
      for (int64_t a : n.arg_ints()) src[a] = nullptr;
      return or_empty(std::move(src));
    default:
      return {};
  }
}

}  // namespace polygrad
