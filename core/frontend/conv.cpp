#include "core/frontend/conv.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/frontend/conv_internal.h"
#include "core/frontend/status_macros.h"

namespace polygrad::frontend {

absl::Status positive(const std::vector<int64_t>& v, size_t n, const char* what) {
  if (v.size() != n)
    return absl::InvalidArgumentError(absl::StrCat(what, " needs ", n, " values, got ", v.size()));
  for (int64_t x : v)
    if (x < 1) return absl::InvalidArgumentError(absl::StrCat(what, " values must be >= 1, got ", x));
  return absl::OkStatus();
}

absl::StatusOr<UOpRef> pad_spatial(const UOpRef& x, const Pairs& pads) {
  const size_t r = x->shape.size(), n = pads.size();
  bool any = false;
  for (const auto& [lo, hi] : pads) any = any || lo != 0 || hi != 0;
  if (!any) return x;
  Pairs all(r, {0, 0});
  std::copy(pads.begin(), pads.end(), all.end() - static_cast<std::ptrdiff_t>(n));
  return pad(x, all);
}

absl::StatusOr<Pairs> spatial_padding(const std::vector<int64_t>& p, size_t n, bool allow_negative) {
  Pairs out;
  if (p.size() == n) {
    for (int64_t v : p) out.emplace_back(v, v);
  } else if (p.size() == 2 * n) {
    for (size_t i = 0; i < n; ++i) out.emplace_back(p[2 * i], p[2 * i + 1]);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("padding needs ", n, " values (one per spatial axis) or ", 2 * n,
                                                   " ((before, after) per axis), got ", p.size()));
  }
  for (int64_t v : p)
    if (v < 0 && !allow_negative) return absl::InvalidArgumentError(absl::StrCat("padding must be >= 0, got ", v));
  return out;
}

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


namespace {

// Axes first..first+n-1 as a list (for reduce, flip and permute).
std::vector<int64_t> axes_from(int64_t first, size_t n) {
  std::vector<int64_t> a(n);
  for (size_t i = 0; i < n; ++i) a[i] = first + static_cast<int64_t>(i);
  return a;
}

absl::Status spatial_count(size_t n, const char* what, const UOpRef& x, const UOpRef& w) {
  if (n < 1 || n > kMaxSpatial || x->shape.size() != n + 2)
    return absl::InvalidArgumentError(absl::StrCat(
        what, " takes an (N, C, *spatial) input and a weight of the same rank with 1 to ", kMaxSpatial,
        " spatial axes, got input (", absl::StrJoin(x->shape, ", "), ") and weight (", absl::StrJoin(w->shape, ", "), ")"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<UOpRef> conv(const UOpRef& x, const UOpRef& w, const ConvParams& p) {
  const size_t ns = w->shape.size() < 2 ? 0 : w->shape.size() - 2;
  if (auto s = spatial_count(ns, "conv", x, w); !s.ok()) return s;
  if (x->dtype != w->dtype)
    return absl::InvalidArgumentError(absl::StrCat("conv input and weight differ in dtype: ", dtype_name(x->dtype), " vs ",
                                                   dtype_name(w->dtype)));
  const int64_t n = x->shape[0], cin_all = x->shape[1], cout = w->shape[0], cin = w->shape[1];
  const int64_t g = p.groups;
  if (g < 1 || cin * g != cin_all || cout % g != 0)
    return absl::InvalidArgumentError(absl::StrCat("conv groups=", g, " do not fit input channels ", cin_all,
                                                   ", weight input channels ", cin, " and output channels ", cout));
  PG_ASSIGN(signed_pads, spatial_padding(p.padding, ns, /*allow_negative=*/true));
  // Negative amounts crop the input first; the rest pads it.
  Pairs crop, pads;
  bool cropped = false;
  for (size_t i = 0; i < 2 + ns; ++i) crop.emplace_back(0, x->shape[i]);
  for (size_t i = 0; i < ns; ++i) {
    const auto [lo, hi] = signed_pads[i];
    const int64_t size = x->shape[2 + i];
    const int64_t begin = std::max<int64_t>(0, -lo), end = size - std::max<int64_t>(0, -hi);
    if (begin > end)
      return absl::InvalidArgumentError(absl::StrCat("conv padding (", lo, ", ", hi, ") crops more than spatial axis ", i,
                                                     " of size ", size));
    cropped = cropped || begin != 0 || end != size;
    crop[2 + i] = {begin, end};
    pads.emplace_back(std::max<int64_t>(0, lo), std::max<int64_t>(0, hi));
  }
  UOpRef xc = x;
  if (cropped) {
    PG_ASSIGN(cut, shrink(x, crop));
    xc = cut;
  }
  PG_ASSIGN(xp, pad_spatial(xc, pads));
  const Shape k(w->shape.begin() + 2, w->shape.end());
  PG_ASSIGN(win, pool_windows(xp, k, p.stride, p.dilation));  // (N, Cin, *out, *k)
  const Shape out(win->shape.begin() + 2, win->shape.begin() + 2 + static_cast<std::ptrdiff_t>(ns));
  const int64_t rc = cout / g;
  const auto nsi = static_cast<int64_t>(ns);
  // Broadcast both to (N, g, Cout/g, *out, Cin/g, *k) and sum over the last 1 + ns axes.
  Shape xr{n, g, cin, 1}, xe{n, g, cin, rc}, wr{1, g, rc}, full{n, g, rc};
  for (int64_t o : out) {
    xr.push_back(o);
    xe.push_back(o);
    wr.push_back(1);
    full.push_back(o);
  }
  wr.push_back(cin);
  full.push_back(cin);
  for (int64_t kk : k) {
    xr.push_back(kk);
    xe.push_back(kk);
    wr.push_back(kk);
    full.push_back(kk);
  }
  std::vector<int64_t> order{0, 1, 3};
  for (int64_t a : axes_from(4, ns)) order.push_back(a);
  order.push_back(2);
  for (int64_t a : axes_from(4 + nsi, ns)) order.push_back(a);
  PG_ASSIGN(x1, reshape(win, xr));
  PG_ASSIGN(x2, expand(x1, xe));
  PG_ASSIGN(x3, permute(x2, order));
  PG_ASSIGN(w1, reshape(w, wr));
  PG_ASSIGN(w2, expand(w1, full));
  PG_ASSIGN(prod, alu(Ops::MUL, {x3, w2}));
  PG_ASSIGN(s, reduce(Ops::ADD, prod, axes_from(3 + nsi, ns + 1)));
  Shape y{n, cout};
  y.insert(y.end(), out.begin(), out.end());
  return reshape(s, y);
}

absl::StatusOr<UOpRef> conv_transpose(const UOpRef& x, const UOpRef& w, const ConvParams& p,
                                      const std::vector<int64_t>& output_padding) {
  const size_t ns = w->shape.size() < 2 ? 0 : w->shape.size() - 2;
  if (auto s = spatial_count(ns, "conv_transpose", x, w); !s.ok()) return s;
  if (auto s = positive(p.stride, ns, "stride"); !s.ok()) return s;
  if (auto s = positive(p.dilation, ns, "dilation"); !s.ok()) return s;
  if (p.padding.size() != ns)
    return absl::InvalidArgumentError(absl::StrCat("conv_transpose padding needs ", ns, " values (one per spatial axis), got ",
                                                   p.padding.size()));
  if (output_padding.size() != ns)
    return absl::InvalidArgumentError(absl::StrCat("output_padding needs ", ns, " values, got ", output_padding.size()));
  const int64_t groups = p.groups, n = x->shape[0], cin = x->shape[1];
  if (groups < 1 || cin % groups != 0 || w->shape[0] != cin)
    return absl::InvalidArgumentError(absl::StrCat("conv_transpose: weight (", absl::StrJoin(w->shape, ", "),
                                                   ") does not fit ", cin, " input channels in ", groups, " groups"));
  const int64_t cout_g = w->shape[1];
  Pairs pads;
  for (size_t i = 0; i < ns; ++i) {
    const int64_t k = w->shape[2 + i], s = p.stride[i], d = p.dilation[i], pd = p.padding[i], op = output_padding[i];
    if (pd < 0 || op < 0 || (op >= s && op >= d))
      return absl::InvalidArgumentError(absl::StrCat("conv_transpose: padding ", pd, " and output_padding ", op,
                                                     " must be >= 0, output_padding smaller than stride or dilation"));
    pads.emplace_back(d * (k - 1) - pd, d * (k - 1) - pd + op);
  }
  // Zero-stuff the input: each spatial element followed by stride - 1 zeros, the last ones cut.
  UOpRef xs = x;
  if (std::any_of(p.stride.begin(), p.stride.end(), [](int64_t s) { return s > 1; })) {
    Shape split{n, cin}, joined{n, cin};
    Pairs grow{{0, 0}, {0, 0}}, cut{{0, n}, {0, cin}};
    for (size_t i = 0; i < ns; ++i) {
      const int64_t in = x->shape[2 + i], s = p.stride[i];
      split.insert(split.end(), {in, 1});
      grow.insert(grow.end(), {{0, 0}, {0, s - 1}});
      joined.push_back(in * s);
      cut.emplace_back(0, in * s - (s - 1));
    }
    PG_ASSIGN(a, reshape(x, split));
    PG_ASSIGN(b, pad(a, grow));
    PG_ASSIGN(c, reshape(b, joined));
    PG_ASSIGN(d, shrink(c, cut));
    xs = d;
  }
  // Negative padding (padding beyond the kernel's reach) crops instead.
  Pairs crop{{0, n}, {0, cin}};
  bool cropped = false;
  for (size_t i = 0; i < ns; ++i) {
    crop.emplace_back(0, xs->shape[2 + i]);
    auto& [lo, hi] = pads[i];
    if (lo < 0) { crop.back().first = -lo; lo = 0; cropped = true; }
    if (hi < 0) { crop.back().second += hi; hi = 0; cropped = true; }
    if (crop.back().first >= crop.back().second)
      return absl::InvalidArgumentError("conv_transpose: padding leaves no output");
  }
  if (cropped) {
    PG_ASSIGN(cr, shrink(xs, crop));
    xs = cr;
  }
  // weight (Cin, Cout/g, *k) -> (g, Cin/g, Cout/g, *k) -> (g, Cout/g, Cin/g, *k), flipped.
  const Shape k(w->shape.begin() + 2, w->shape.end());
  Shape grouped{groups, cin / groups, cout_g}, regrouped{groups * cout_g, cin / groups};
  grouped.insert(grouped.end(), k.begin(), k.end());
  regrouped.insert(regrouped.end(), k.begin(), k.end());
  std::vector<int64_t> order{0, 2, 1};
  for (int64_t a : axes_from(3, ns)) order.push_back(a);
  PG_ASSIGN(w1, reshape(w, grouped));
  PG_ASSIGN(w2, permute(w1, order));
  PG_ASSIGN(w3, flip(w2, axes_from(3, ns)));
  PG_ASSIGN(w4, reshape(w3, regrouped));
  ConvParams q;
  q.stride.assign(ns, 1);
  for (const auto& [lo, hi] : pads) q.padding.insert(q.padding.end(), {lo, hi});
  q.dilation = p.dilation;
  q.groups = groups;
  return conv(xs, w4, q);
}

}  // namespace polygrad::frontend
