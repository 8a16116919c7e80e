#include "core/frontend/conv.h"

#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/frontend/status_macros.h"
#include "core/frontend/tensor_ops.h"

namespace polygrad::frontend {
namespace {

absl::Status positive(const std::vector<int64_t>& v, size_t n, const char* what) {
  if (v.size() != n)
    return absl::InvalidArgumentError(absl::StrCat(what, " needs ", n, " values, got ", v.size()));
  for (int64_t x : v)
    if (x < 1) return absl::InvalidArgumentError(absl::StrCat(what, " values must be >= 1, got ", x));
  return absl::OkStatus();
}

// (top, bottom, left, right) from (h, w) or the four values.
absl::StatusOr<std::vector<int64_t>> padding4(const std::vector<int64_t>& p) {
  std::vector<int64_t> out;
  if (p.size() == 2) out = {p[0], p[0], p[1], p[1]};
  else if (p.size() == 4) out = p;
  else return absl::InvalidArgumentError(absl::StrCat("padding needs 2 or 4 values, got ", p.size()));
  for (int64_t v : out)
    if (v < 0) return absl::InvalidArgumentError(absl::StrCat("padding must be >= 0, got ", v));
  return out;
}

// The smallest value of a dtype (-inf for floats), exactly representable in it.
std::variant<int64_t, double> lowest(DType dt) {
  switch (dt) {
    case DType::Int8: return int64_t{std::numeric_limits<int8_t>::min()};
    case DType::Int16: return int64_t{std::numeric_limits<int16_t>::min()};
    case DType::Int32: return int64_t{std::numeric_limits<int32_t>::min()};
    case DType::Int64: return std::numeric_limits<int64_t>::min();
    default:
      if (dtype_is_float(dt)) return -std::numeric_limits<double>::infinity();
      return int64_t{0};  // unsigned and bool
  }
}

absl::StatusOr<UOpRef> pad_spatial(const UOpRef& x, const std::vector<int64_t>& pad4) {
  Pairs pairs(x->shape.size(), {0, 0});
  size_t r = x->shape.size();
  pairs[r - 2] = {pad4[0], pad4[1]};
  pairs[r - 1] = {pad4[2], pad4[3]};
  return pad(x, pairs);
}

}  // namespace

absl::StatusOr<UOpRef> pool_windows(const UOpRef& x, const std::vector<int64_t>& kernel,
                                    const std::vector<int64_t>& stride, const std::vector<int64_t>& dilation) {
  const size_t nk = kernel.size();
  if (nk == 0 || nk > x->shape.size())
    return absl::InvalidArgumentError(absl::StrCat("pooling over ", nk, " axes of a rank-", x->shape.size(), " tensor"));
  if (auto s = positive(kernel, nk, "kernel"); !s.ok()) return s;
  if (auto s = positive(stride, nk, "stride"); !s.ok()) return s;
  if (auto s = positive(dilation, nk, "dilation"); !s.ok()) return s;
  const size_t np = x->shape.size() - nk;
  Shape prefix(x->shape.begin(), x->shape.begin() + static_cast<std::ptrdiff_t>(np));
  std::vector<int64_t> in(x->shape.begin() + static_cast<std::ptrdiff_t>(np), x->shape.end()), out(nk), row(nk), tiles(nk);
  for (size_t i = 0; i < nk; ++i) {
    int64_t span = dilation[i] * (kernel[i] - 1) + 1;
    if (in[i] < span)
      return absl::InvalidArgumentError(absl::StrCat("window of ", span, " does not fit axis of size ", in[i]));
    out[i] = (in[i] - span) / stride[i] + 1;
    // Tile the axis `tiles` times and read it as rows of length row = m*in + dilation: row r,
    // column c is then element (r*dilation + c) of the axis, i.e. window r at position c.
    int64_t m = std::max<int64_t>(1, (out[i] * stride[i] - dilation[i] + in[i] - 1) / in[i]);
    row[i] = m * in[i] + dilation[i];
    tiles[i] = (kernel[i] * row[i] + in[i] - 1) / in[i];
  }
  Shape s1 = prefix, s2 = prefix, s3 = prefix;
  for (size_t i = 0; i < nk; ++i) {
    s1.insert(s1.end(), {1, in[i]});
    s2.insert(s2.end(), {tiles[i], in[i]});
    s3.push_back(tiles[i] * in[i]);
  }
  PG_ASSIGN(a, reshape(x, s1));
  PG_ASSIGN(b, expand(a, s2));
  PG_ASSIGN(c, reshape(b, s3));
  // Shrink pairs keep every prefix axis whole.
  Pairs whole;
  for (size_t i = 0; i < np; ++i) whole.emplace_back(0, prefix[i]);
  Pairs p1 = whole;
  for (size_t i = 0; i < nk; ++i) p1.emplace_back(0, kernel[i] * row[i]);
  PG_ASSIGN(d, shrink(c, p1));
  Shape s4 = prefix;
  for (size_t i = 0; i < nk; ++i) s4.insert(s4.end(), {kernel[i], row[i]});
  PG_ASSIGN(e, reshape(d, s4));
  Pairs p2 = whole;
  for (size_t i = 0; i < nk; ++i) p2.insert(p2.end(), {{0, kernel[i]}, {0, out[i] * stride[i]}});
  PG_ASSIGN(f, shrink(e, p2));
  Shape s5 = prefix;
  for (size_t i = 0; i < nk; ++i) s5.insert(s5.end(), {kernel[i], out[i], stride[i]});
  PG_ASSIGN(g, reshape(f, s5));
  Pairs p3 = whole;
  for (size_t i = 0; i < nk; ++i) p3.insert(p3.end(), {{0, kernel[i]}, {0, out[i]}, {0, 1}});
  PG_ASSIGN(h, shrink(g, p3));
  Shape s6 = prefix;
  for (size_t i = 0; i < nk; ++i) s6.insert(s6.end(), {kernel[i], out[i]});
  PG_ASSIGN(k, reshape(h, s6));
  std::vector<int64_t> order;
  for (size_t i = 0; i < np; ++i) order.push_back(static_cast<int64_t>(i));
  for (size_t i = 0; i < nk; ++i) order.push_back(static_cast<int64_t>(np + 2 * i + 1));
  for (size_t i = 0; i < nk; ++i) order.push_back(static_cast<int64_t>(np + 2 * i));
  return permute(k, order);
}

absl::StatusOr<UOpRef> conv_transpose2d(const UOpRef& x, const UOpRef& w, const Conv2dParams& p,
                                        const std::vector<int64_t>& output_padding) {
  if (x->shape.size() != 4 || w->shape.size() != 4)
    return absl::InvalidArgumentError(absl::StrCat("conv_transpose2d takes (N, Cin, H, W) input and (Cin, Cout/groups, KH, KW) "
                                                   "weight, got ranks ", x->shape.size(), " and ", w->shape.size()));
  if (auto s = positive(p.stride, 2, "stride"); !s.ok()) return s;
  if (auto s = positive(p.dilation, 2, "dilation"); !s.ok()) return s;
  if (p.padding.size() != 2)
    return absl::InvalidArgumentError(absl::StrCat("conv_transpose2d padding needs 2 values (h, w), got ", p.padding.size()));
  if (output_padding.size() != 2)
    return absl::InvalidArgumentError(absl::StrCat("output_padding needs 2 values (h, w), got ", output_padding.size()));
  const int64_t groups = p.groups, cin = x->shape[1];
  if (groups < 1 || cin % groups != 0 || w->shape[0] != cin)
    return absl::InvalidArgumentError(absl::StrCat("conv_transpose2d: weight (", absl::StrJoin(w->shape, ", "),
                                                   ") does not fit ", cin, " input channels in ", groups, " groups"));
  const int64_t cout_g = w->shape[1];
  std::vector<int64_t> pad4;
  for (int i = 0; i < 2; ++i) {
    const int64_t k = w->shape[2 + i], s = p.stride[i], d = p.dilation[i], pd = p.padding[i], op = output_padding[i];
    if (pd < 0 || op < 0 || (op >= s && op >= d))
      return absl::InvalidArgumentError(absl::StrCat("conv_transpose2d: padding ", pd, " and output_padding ", op,
                                                     " must be >= 0, output_padding smaller than stride or dilation"));
    pad4.push_back(d * (k - 1) - pd);
    pad4.push_back(d * (k - 1) - pd + op);
  }
  // Zero-stuff the input: each spatial element followed by stride - 1 zeros, the last ones cut.
  UOpRef xs = x;
  if (p.stride[0] > 1 || p.stride[1] > 1) {
    const int64_t n = x->shape[0], h = x->shape[2], wd = x->shape[3], sh = p.stride[0], sw = p.stride[1];
    PG_ASSIGN(a, reshape(x, {n, cin, h, 1, wd, 1}));
    PG_ASSIGN(b, pad(a, {{0, 0}, {0, 0}, {0, 0}, {0, sh - 1}, {0, 0}, {0, sw - 1}}));
    PG_ASSIGN(c, reshape(b, {n, cin, h * sh, wd * sw}));
    PG_ASSIGN(d, shrink(c, {{0, n}, {0, cin}, {0, h * sh - (sh - 1)}, {0, wd * sw - (sw - 1)}}));
    xs = d;
  }
  // Negative padding (padding beyond the kernel's reach) crops instead.
  Pairs crop{{0, xs->shape[0]}, {0, xs->shape[1]}, {0, xs->shape[2]}, {0, xs->shape[3]}};
  bool cropped = false;
  for (int i = 0; i < 2; ++i) {
    int64_t& lo = pad4[2 * i];
    int64_t& hi = pad4[2 * i + 1];
    if (lo < 0) { crop[2 + i].first = -lo; lo = 0; cropped = true; }
    if (hi < 0) { crop[2 + i].second += hi; hi = 0; cropped = true; }
    if (crop[2 + i].first > crop[2 + i].second)
      return absl::InvalidArgumentError("conv_transpose2d: padding leaves no output");
  }
  if (cropped) {
    PG_ASSIGN(cr, shrink(xs, crop));
    xs = cr;
  }
  // weight (Cin, Cout/g, KH, KW) -> (g, Cin/g, Cout/g, KH, KW) -> (g, Cout/g, Cin/g, KH, KW), flipped.
  const int64_t kh = w->shape[2], kw = w->shape[3];
  PG_ASSIGN(w1, reshape(w, {groups, cin / groups, cout_g, kh, kw}));
  PG_ASSIGN(w2, permute(w1, {0, 2, 1, 3, 4}));
  PG_ASSIGN(w3, flip(w2, {3, 4}));
  PG_ASSIGN(w4, reshape(w3, {groups * cout_g, cin / groups, kh, kw}));
  Conv2dParams q;
  q.stride = {1, 1};
  q.padding = pad4;
  q.dilation = p.dilation;
  q.groups = groups;
  return conv2d(xs, w4, q);
}

absl::StatusOr<UOpRef> conv2d(const UOpRef& x, const UOpRef& w, const Conv2dParams& p) {
  if (x->shape.size() != 4 || w->shape.size() != 4)
    return absl::InvalidArgumentError(absl::StrCat("conv2d takes (N, C, H, W) input and (O, C/groups, KH, KW) weight, got ranks ",
                                                   x->shape.size(), " and ", w->shape.size()));
  if (x->dtype != w->dtype)
    return absl::InvalidArgumentError(absl::StrCat("conv2d input and weight differ in dtype: ", dtype_name(x->dtype), " vs ",
                                                   dtype_name(w->dtype)));
  const int64_t n = x->shape[0], cin_all = x->shape[1], cout = w->shape[0], cin = w->shape[1];
  const int64_t g = p.groups;
  if (g < 1 || cin * g != cin_all || cout % g != 0)
    return absl::InvalidArgumentError(absl::StrCat("conv2d groups=", g, " do not fit input channels ", cin_all,
                                                   ", weight input channels ", cin, " and output channels ", cout));
  PG_ASSIGN(pad4, padding4(p.padding));
  PG_ASSIGN(xp, pad_spatial(x, pad4));
  const int64_t kh = w->shape[2], kw = w->shape[3];
  PG_ASSIGN(win, pool_windows(xp, {kh, kw}, p.stride, p.dilation));  // (N, Cin, OH, OW, KH, KW)
  const int64_t oh = win->shape[2], ow = win->shape[3], rc = cout / g;
  Shape full{n, g, rc, oh, ow, cin, kh, kw};
  PG_ASSIGN(xr, reshape(win, {n, g, cin, 1, oh, ow, kh, kw}));
  PG_ASSIGN(xe, expand(xr, {n, g, cin, rc, oh, ow, kh, kw}));
  PG_ASSIGN(xt, permute(xe, {0, 1, 3, 4, 5, 2, 6, 7}));
  PG_ASSIGN(wr, reshape(w, {1, g, rc, 1, 1, cin, kh, kw}));
  PG_ASSIGN(we, expand(wr, full));
  PG_ASSIGN(prod, alu(Ops::MUL, {xt, we}));
  PG_ASSIGN(s, reduce(Ops::ADD, prod, {5, 6, 7}));
  return reshape(s, {n, cout, oh, ow});
}

absl::StatusOr<UOpRef> max_pool2d(const UOpRef& x, const std::vector<int64_t>& kernel, const Conv2dParams& p) {
  if (x->shape.size() < 2) return absl::InvalidArgumentError("max_pool2d needs at least 2 axes");
  PG_ASSIGN(pad4, padding4(p.padding));
  UOpRef src = x;
  if (pad4 != std::vector<int64_t>{0, 0, 0, 0}) {
    // Padding must never win a max: pad with -inf (or the dtype's lowest value).
    PG_ASSIGN(ones, constant(int64_t{1}, DType::Bool, x->shape));
    PG_ASSIGN(inside, pad_spatial(ones, pad4));
    PG_ASSIGN(padded, pad_spatial(x, pad4));
    PG_ASSIGN(fill, constant(lowest(x->dtype), x->dtype, padded->shape));
    PG_ASSIGN(masked, alu(Ops::WHERE, {inside, padded, fill}));
    src = masked;
  }
  PG_ASSIGN(win, pool_windows(src, kernel, p.stride, p.dilation));
  int64_t r = static_cast<int64_t>(win->shape.size());
  PG_ASSIGN(m, reduce(Ops::MAX, win, {r - 2, r - 1}));
  Shape out(win->shape.begin(), win->shape.end() - 2);
  return reshape(m, out);
}

absl::StatusOr<UOpRef> avg_pool2d(const UOpRef& x, const std::vector<int64_t>& kernel, const Conv2dParams& p) {
  if (!dtype_is_float(x->dtype)) return absl::InvalidArgumentError("avg_pool2d needs a float tensor");
  if (x->shape.size() < 2) return absl::InvalidArgumentError("avg_pool2d needs at least 2 axes");
  PG_ASSIGN(pad4, padding4(p.padding));
  PG_ASSIGN(padded, pad_spatial(x, pad4));
  PG_ASSIGN(win, pool_windows(padded, kernel, p.stride, p.dilation));
  int64_t r = static_cast<int64_t>(win->shape.size());
  PG_ASSIGN(s, reduce(Ops::ADD, win, {r - 2, r - 1}));
  Shape out(win->shape.begin(), win->shape.end() - 2);
  PG_ASSIGN(flat, reshape(s, out));
  PG_ASSIGN(inv, constant(1.0 / static_cast<double>(kernel[0] * kernel[1]), x->dtype, out));
  return alu(Ops::MUL, {flat, inv});
}

}  // namespace polygrad::frontend
