#include "core/frontend/composite_ops.h"

#include <algorithm>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/frontend/composites.h"
#include "core/frontend/conv.h"
#include "core/frontend/status_macros.h"
#include "core/frontend/tensor_ops.h"

namespace polygrad::frontend {
namespace {

namespace fe = ::polygrad::frontend;

constexpr int64_t kSaturated = std::numeric_limits<int64_t>::max();

// Arithmetic on checked values that saturates instead of overflowing; a saturated size then
// fails check_shape with RESOURCE_EXHAUSTED.
int64_t sat_add(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? kSaturated : r;
}
int64_t sat_mul(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? kSaturated : r;
}

const char* window_name(WindowKind op) {
  switch (op) {
    case WindowKind::Conv: return "CONV2D";
    case WindowKind::ConvTranspose: return "CONV_TRANSPOSE2D";
    case WindowKind::MaxPool: return "MAX_POOL2D";
    case WindowKind::AvgPool: return "AVG_POOL2D";
  }
  return "window op";
}

std::string dims(const Shape& s) { return absl::StrCat("(", absl::StrJoin(s, ", "), ")"); }

class WindowOp {
 public:
  WindowOp(WindowKind op, const CompositeCall& call)
      : op_(op), c_(call.arg), src_(call.src), call_(call), name_(window_name(op)) {}

  absl::StatusOr<UOpRef> build() {
    const UOpRef& x = src_[0];
    const bool conv = op_ == WindowKind::Conv || op_ == WindowKind::ConvTranspose;
    std::vector<int64_t> kernel;
    if (conv) {
      const UOpRef& w = src_[1];
      if (w->shape.size() < 3 || w->shape.size() > 2 + fe::kMaxSpatial || x->shape.size() != w->shape.size())
        return invalid(absl::StrCat("takes an input (N, C, *spatial) and a weight (", weight_layout(),
                                    ", *kernel) of the same rank, 3 to ", 2 + fe::kMaxSpatial, " (1 to ", fe::kMaxSpatial,
                                    " spatial axes); got input ", dims(x->shape), " and weight ", dims(w->shape)));
      kernel.assign(w->shape.begin() + 2, w->shape.end());
      if (absl::Status s = values("the weight's kernel", kernel, 1); !s.ok()) return s;
    } else {
      kernel.assign(c_.kernel.begin(), c_.kernel.end());
      if (kernel.empty() || kernel.size() > fe::kMaxSpatial || kernel.size() > x->shape.size())
        return invalid(absl::StrCat("pools over the last len(kernel) axes, 1 to ", fe::kMaxSpatial,
                                    "; got a kernel of ", kernel.size(), " values for input ", dims(x->shape)));
      if (absl::Status s = values("kernel", kernel, 1); !s.ok()) return s;
    }
    const size_t n = kernel.size();
    p_.stride = list(c_.stride, conv ? std::vector<int64_t>(n, 1) : kernel);
    p_.dilation = list(c_.dilation, std::vector<int64_t>(n, 1));
    p_.padding = list(c_.padding, std::vector<int64_t>(n, 0));
    p_.groups = c_.groups == 0 ? 1 : c_.groups;
    if (absl::Status s = length("stride", p_.stride, n); !s.ok()) return s;
    if (absl::Status s = length("dilation", p_.dilation, n); !s.ok()) return s;
    if (absl::Status s = values("stride", p_.stride, 1); !s.ok()) return s;
    if (absl::Status s = values("dilation", p_.dilation, 1); !s.ok()) return s;
    // A convolution's negative padding crops the input (tinygrad, torch's conv on a slice).
    const int64_t lowest_pad = conv ? std::numeric_limits<int64_t>::min() : 0;
    if (absl::Status s = values("padding", p_.padding, lowest_pad); !s.ok()) return s;
    if (op_ == WindowKind::ConvTranspose) return build_transpose(kernel);
    if (p_.padding.size() != n && p_.padding.size() != 2 * n)
      return invalid(absl::StrCat("padding needs ", n, " values (one per spatial axis) or ", 2 * n,
                                  " ((before, after) per axis), got ", p_.padding.size()));
    if (op_ != WindowKind::MaxPool && c_.indices) return invalid("indices are for MAX_POOL2D only");
    if (conv && c_.ceil_mode) return invalid("ceil_mode is for MAX_POOL2D and AVG_POOL2D only");
    absl::StatusOr<fe::Pairs> pads = fe::spatial_padding(p_.padding, n, conv);
    if (!pads.ok()) return pads.status();
    // What counts in a mean's divisor is the user's padding, in its form, not ceil_mode's growth.
    const std::vector<int64_t> users_padding = p_.padding;
    const bool grew = c_.ceil_mode && grow_for_ceil(x->shape, kernel, *pads);
    // The padded input, and the work: every output element reads a whole window (a convolution's
    // window spans the group's input channels too).
    const size_t lead = x->shape.size() - n;
    Shape padded(x->shape.begin(), x->shape.begin() + static_cast<std::ptrdiff_t>(lead));
    Shape work = padded;
    if (conv) work[1] = src_[1]->shape[0];
    Shape window;
    if (conv) window.push_back(src_[1]->shape[1]);
    for (size_t i = 0; i < n; ++i) {
      const int64_t size = sat_add(x->shape[lead + i], sat_add((*pads)[i].first, (*pads)[i].second));
      const int64_t span = sat_add(sat_mul(p_.dilation[i], kernel[i] - 1), 1);
      if (size < span)
        return invalid(absl::StrCat("a window of ", span, " (kernel ", kernel[i], ", dilation ", p_.dilation[i],
                                    ") does not fit spatial axis ", i, " of input ", dims(x->shape), " padded to ", size));
      padded.push_back(size);
      work.push_back((size - span) / p_.stride[i] + 1);
      window.push_back(kernel[i]);
    }
    if (absl::Status s = call_.check_shape(padded, absl::StrCat(name_, "'s padded input")); !s.ok()) return s;
    if (absl::Status s = check_work(work, window); !s.ok()) return s;
    if (op_ != WindowKind::AvgPool && !c_.counted_padding.empty()) return invalid("counted_padding is for AVG_POOL2D only");
    switch (op_) {
      case WindowKind::Conv: return with_bias(fe::conv(x, src_[1], p_));
      case WindowKind::MaxPool: return c_.indices ? fe::max_pool_indices(x, kernel, p_) : fe::max_pool(x, kernel, p_);
      default: break;
    }
    if (c_.counted_padding.empty() && !grew) return fe::avg_pool(x, kernel, p_);
    return avg_pool_counted(kernel, *pads, c_.counted_padding.empty() ? users_padding : c_.counted_padding,
                            users_padding.size());
  }

 private:
  // torch's ceil_mode: each axis keeps ceil((padded - span) / stride) + 1 windows, less a last one
  // that would start past the input and its before-padding; the after-padding grows to hold the
  // last window. p_.padding takes the (before, after) pairs; true when one grew.
  bool grow_for_ceil(const Shape& shape, const std::vector<int64_t>& kernel, fe::Pairs& pads) {
    const size_t n = kernel.size(), lead = shape.size() - n;
    bool grew = false;
    p_.padding.clear();
    for (size_t i = 0; i < n; ++i) {
      auto& [before, after] = pads[i];
      const int64_t size = shape[lead + i], stride = p_.stride[i];
      const int64_t span = sat_add(sat_mul(p_.dilation[i], kernel[i] - 1), 1);
      const int64_t room = sat_add(size, sat_add(before, after)) - span;
      if (room >= 0 && room < kSaturated - stride) {  // else the fit check below reports the axis
        int64_t last = (room + stride - 1) / stride * stride;  // the last window's start, padded
        if (last >= size + before) last -= stride;
        if (last > room) {
          after += last - room;
          grew = true;
        }
      }
      p_.padding.insert(p_.padding.end(), {before, after});
    }
    return grew;
  }

  // The mean over each window's elements that count: the input and counted_padding's share of
  // the padding (torch's count_include_pad=False counts none; by default the user's padding
  // counts, ceil_mode's growth does not). The window sum over the kernel's volume, divided by the
  // share of the window that counts: the same pool over ones of the counted region.
  absl::StatusOr<UOpRef> avg_pool_counted(const std::vector<int64_t>& kernel, const fe::Pairs& pads,
                                          const std::vector<int64_t>& counted_padding, size_t padding_form) {
    const UOpRef& x = src_[0];
    const size_t n = kernel.size();
    if (counted_padding.size() != padding_form)
      return invalid(absl::StrCat("counted_padding needs padding's form (", padding_form, " values), got ",
                                  counted_padding.size()));
    if (absl::Status s = values("counted_padding", counted_padding, 0); !s.ok()) return s;
    absl::StatusOr<fe::Pairs> counted = fe::spatial_padding(counted_padding, n, false);
    if (!counted.ok()) return counted.status();
    const size_t lead = x->shape.size() - n;
    Shape region;
    fe::ConvParams rest = p_;
    rest.padding.clear();
    for (size_t i = 0; i < n; ++i) {
      const auto [before, after] = (*counted)[i];
      if (before > pads[i].first || after > pads[i].second)
        return invalid(absl::StrCat("counted_padding (", before, ", ", after, ") exceeds the padding (", pads[i].first,
                                    ", ", pads[i].second, ") of spatial axis ", i));
      region.push_back(x->shape[lead + i] + before + after);
      rest.padding.insert(rest.padding.end(), {pads[i].first - before, pads[i].second - after});
    }
    PG_ASSIGN(mean, fe::avg_pool(x, kernel, p_));
    PG_ASSIGN(ones, fe::constant(1, x->dtype, region));
    PG_ASSIGN(share, fe::avg_pool(ones, kernel, rest));
    PG_ASSIGN(spread, fe::broadcast_to(share, mean->shape));
    return fe::alu(Ops::FDIV, {mean, spread});
  }

  absl::StatusOr<UOpRef> build_transpose(const std::vector<int64_t>& kernel) {
    const UOpRef& x = src_[0];
    const size_t n = kernel.size();
    if (p_.padding.size() != n)
      return invalid(absl::StrCat("padding needs ", n, " values (one per spatial axis), got ", p_.padding.size()));
    std::vector<int64_t> output_padding = list(c_.output_padding, std::vector<int64_t>(n, 0));
    if (absl::Status s = length("output_padding", output_padding, n); !s.ok()) return s;
    if (absl::Status s = values("output_padding", output_padding, 0); !s.ok()) return s;
    const int64_t groups = p_.groups;
    if (groups < 1 || x->shape[1] % groups != 0)
      return invalid(absl::StrCat("groups=", groups, " do not divide the ", x->shape[1], " input channels"));
    // It runs as a convolution of the zero-stuffed, padded input: bound that input and the work.
    Shape stuffed{x->shape[0], x->shape[1]}, work{x->shape[0], sat_mul(src_[1]->shape[1], groups)};
    Shape window{x->shape[1] / groups};
    for (size_t i = 0; i < n; ++i) {
      const int64_t reach = sat_mul(p_.dilation[i], kernel[i] - 1);
      stuffed.push_back(sat_add(sat_mul(x->shape[2 + i], p_.stride[i]), sat_add(sat_mul(reach, 2), output_padding[i])));
      const int64_t out = sat_add(sat_add(sat_mul(x->shape[2 + i] - 1, p_.stride[i]), reach),
                                  sat_add(output_padding[i] + 1, sat_mul(-2, p_.padding[i])));
      if (out <= 0)
        return invalid(absl::StrCat("padding ", p_.padding[i], " leaves no output on spatial axis ", i, " of input ",
                                    dims(x->shape), " with weight ", dims(src_[1]->shape)));
      work.push_back(out);
      window.push_back(kernel[i]);
    }
    if (absl::Status s = call_.check_shape(stuffed, absl::StrCat(name_, "'s zero-stuffed input")); !s.ok()) return s;
    if (absl::Status s = check_work(work, window); !s.ok()) return s;
    return with_bias(fe::conv_transpose(x, src_[1], p_, output_padding));
  }

  // A convolution's optional third source: the bias (output channels,) added per channel.
  absl::StatusOr<UOpRef> with_bias(absl::StatusOr<UOpRef> y) const {
    if (!y.ok() || src_.size() < 3) return y;
    return fe::channel_affine(*y, nullptr, src_[2]);
  }

  // output elements × window elements: computed, never allocated, so held to the work bound.
  absl::Status check_work(const Shape& out, const Shape& window) const {
    Shape grid = out;
    grid.insert(grid.end(), window.begin(), window.end());
    const std::string what = absl::StrCat(name_, "'s work: output ", dims(out), " times window ", dims(window));
    return call_.check_work(grid, what);
  }

  const char* weight_layout() const { return op_ == WindowKind::Conv ? "O, C/groups" : "C, O/groups"; }

  static std::vector<int64_t> list(const std::vector<int64_t>& f, std::vector<int64_t> fallback) {
    return f.empty() ? fallback : f;
  }

  absl::Status length(const char* what, const std::vector<int64_t>& v, size_t n) const {
    if (v.size() == n) return absl::OkStatus();
    return invalid(absl::StrCat(what, " needs ", n, " values (one per spatial axis), got ", v.size()));
  }

  absl::Status values(const char* what, const std::vector<int64_t>& v, int64_t low) const {
    for (int64_t x : v) {
      if (x < low) return invalid(absl::StrCat(what, " values must be >= ", low, ", got ", x));
      const uint64_t magnitude = x < 0 ? 0 - static_cast<uint64_t>(x) : static_cast<uint64_t>(x);
      if (magnitude > call_.max_elements)
        return absl::ResourceExhaustedError(
            absl::StrCat(what, " value ", x, " exceeds max_elements (", call_.max_elements, ")"));
    }
    return absl::OkStatus();
  }

  static absl::Status invalid(const std::string& msg) { return absl::InvalidArgumentError(msg); }

  WindowKind op_;
  const CompositeArgs& c_;
  std::span<const UOpRef> src_;
  const CompositeCall& call_;
  std::string name_;
  fe::ConvParams p_;
};

}  // namespace

absl::StatusOr<UOpRef> build_window(WindowKind op, const CompositeCall& call) { return WindowOp(op, call).build(); }

}  // namespace polygrad::frontend
