#include "core/frontend/einsum.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/frontend/composites.h"
#include "core/frontend/status_macros.h"
#include "core/frontend/tensor_ops.h"

namespace polygrad::frontend {
namespace {

// An axis label: a letter's ASCII code, or kEllipsis + j for the j-th axis "..." covers (the
// ellipsis axes lead an implicit output, in their order).
using Label = int;
constexpr Label kEllipsis = 1000;
using Labels = std::vector<Label>;

absl::Status invalid(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("einsum: ", what));
}

std::string label_name(Label l) {
  return l >= kEllipsis ? absl::StrCat("'...' axis ", l - kEllipsis) : absl::StrCat("'", std::string(1, char(l)), "'");
}

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// One side's spec: its letters and whether (and where) it has "...".
struct Spec {
  std::string letters;
  bool ellipsis = false;
  size_t ellipsis_at = 0;  // how many letters precede "..."
};

absl::StatusOr<Spec> parse_spec(std::string_view s, const std::string& what) {
  Spec out;
  for (size_t i = 0; i < s.size();) {
    if (s.substr(i, 3) == "...") {
      if (out.ellipsis) return invalid(absl::StrCat(what, " has more than one '...'"));
      out.ellipsis = true;
      out.ellipsis_at = out.letters.size();
      i += 3;
    } else if (is_letter(s[i])) {
      out.letters.push_back(s[i++]);
    } else {
      const unsigned char c = static_cast<unsigned char>(s[i]);
      return invalid(c >= 0x20 && c < 0x7f ? absl::StrCat(what, ": '", std::string(1, s[i]), "' is not a letter or '...'")
                                           : absl::StrCat(what, ": byte ", int{c}, " is not a letter or '...'"));
    }
  }
  return out;
}

// The spec's labels with "..." standing for `covered` axes, right-aligned among `ell`.
Labels expand(const Spec& s, int64_t covered, int64_t ell) {
  Labels out;
  for (size_t i = 0; i <= s.letters.size(); ++i) {
    if (s.ellipsis && i == s.ellipsis_at)
      for (int64_t j = ell - covered; j < ell; ++j) out.push_back(kEllipsis + static_cast<Label>(j));
    if (i < s.letters.size()) out.push_back(s.letters[i]);
  }
  return out;
}

// x's elements (i, i) of axes p < q, as a new last axis of x's size there (p and q removed).
absl::StatusOr<UOpRef> diagonal_last(const UOpRef& x, size_t p, size_t q) {
  std::vector<int64_t> order;
  for (size_t i = 0; i < x->shape.size(); ++i)
    if (i != p && i != q) order.push_back(static_cast<int64_t>(i));
  order.push_back(static_cast<int64_t>(p));
  order.push_back(static_cast<int64_t>(q));
  PG_ASSIGN(moved, permute(x, order));
  Shape batch(moved->shape.begin(), moved->shape.end() - 2);
  const int64_t n = x->shape[p];
  // The n x n block read with a row stride of n + 1 walks its diagonal.
  Shape flat = batch;
  flat.push_back(n * n);
  PG_ASSIGN(rows, reshape(moved, flat));
  Pairs widen(batch.size(), {0, 0});
  widen.push_back({0, n});
  PG_ASSIGN(padded, pad(rows, widen));
  Shape strided = batch;
  strided.insert(strided.end(), {n, n + 1});
  PG_ASSIGN(grid, reshape(padded, strided));
  Pairs keep;
  for (int64_t s : batch) keep.push_back({0, s});
  keep.push_back({0, n});
  keep.push_back({0, 1});
  PG_ASSIGN(first, shrink(grid, keep));
  Shape out = batch;
  out.push_back(n);
  return reshape(first, out);
}

}  // namespace

absl::StatusOr<UOpRef> einsum(std::span<const UOpRef> xs, std::string_view equation,
                              const std::function<absl::Status(const Shape& grid)>& check_grid) {
  if (xs.empty()) return invalid("takes one or more operands");
  if (equation.size() > kMaxEinsumEquation)
    return invalid(absl::StrCat("the equation has ", equation.size(), " characters, more than ", kMaxEinsumEquation));
  std::string eq;
  for (char c : equation)
    if (c != ' ') eq.push_back(c);
  for (const UOpRef& x : xs)
    if (x->dtype != xs[0]->dtype)
      return invalid(absl::StrCat("operands have dtypes ", dtype_name(xs[0]->dtype), " and ", dtype_name(x->dtype),
                                  " (a client promotes them to one first)"));

  const size_t arrow = eq.find("->");
  const bool explicit_out = arrow != std::string::npos;
  const std::string lhs = eq.substr(0, arrow), rhs = explicit_out ? eq.substr(arrow + 2) : "";
  if (rhs.find("->") != std::string::npos) return invalid("the equation has more than one '->'");
  std::vector<std::string> specs = absl::StrSplit(lhs, ',');
  if (specs.size() != xs.size())
    return invalid(absl::StrCat("the equation has ", specs.size(), " operands, ", xs.size(), " tensors given"));

  std::vector<Spec> parsed;
  std::vector<int64_t> covered;
  int64_t ell = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const std::string what = absl::StrCat("operand ", i);
    PG_ASSIGN(s, parse_spec(specs[i], what));
    const int64_t rank = static_cast<int64_t>(xs[i]->shape.size());
    const int64_t c = rank - static_cast<int64_t>(s.letters.size());
    if (c < 0 || (!s.ellipsis && c != 0))
      return invalid(absl::StrCat(what, " names ", s.letters.size(), " axes but has ", rank));
    parsed.push_back(std::move(s));
    covered.push_back(c);
    ell = std::max(ell, c);
  }

  // Each operand's labels, its repeated labels taken along their diagonals.
  std::vector<Labels> axes;
  std::vector<UOpRef> ops;
  std::map<Label, int> uses;  // over the written specs: an implicit output keeps labels used once
  for (size_t i = 0; i < xs.size(); ++i) {
    Labels a = expand(parsed[i], covered[i], ell);
    for (Label l : a) ++uses[l];
    UOpRef t = xs[i];
    for (;;) {
      size_t p = 0, q = 0;
      for (p = 0; p < a.size(); ++p) {
        q = static_cast<size_t>(std::find(a.begin() + p + 1, a.end(), a[p]) - a.begin());
        if (q < a.size()) break;
      }
      if (p == a.size()) break;
      if (t->shape[p] != t->shape[q])
        return invalid(absl::StrCat("label ", label_name(a[p]), " repeats in operand ", i, " over axes of sizes ",
                                    t->shape[p], " and ", t->shape[q]));
      PG_ASSIGN(d, diagonal_last(t, p, q));
      t = d;
      const Label l = a[p];
      a.erase(a.begin() + static_cast<std::ptrdiff_t>(q));
      a.erase(a.begin() + static_cast<std::ptrdiff_t>(p));
      a.push_back(l);
    }
    axes.push_back(std::move(a));
    ops.push_back(std::move(t));
  }
  auto in_inputs = [&](Label l) {
    return std::any_of(axes.begin(), axes.end(), [&](const Labels& a) { return std::find(a.begin(), a.end(), l) != a.end(); });
  };

  Labels out;
  if (explicit_out) {
    PG_ASSIGN(s, parse_spec(rhs, "the output"));
    out = expand(s, ell, ell);
    for (size_t i = 0; i < out.size(); ++i) {
      if (!in_inputs(out[i])) return invalid(absl::StrCat("output label ", label_name(out[i]), " is not in any input"));
      if (std::find(out.begin() + static_cast<std::ptrdiff_t>(i) + 1, out.end(), out[i]) != out.end())
        return invalid(absl::StrCat("output label ", label_name(out[i]), " repeats"));
    }
  } else {
    for (int64_t j = 0; j < ell; ++j) out.push_back(kEllipsis + static_cast<Label>(j));
    for (const auto& [l, n] : uses)  // std::map: ASCII order
      if (l < kEllipsis && n == 1) out.push_back(l);
  }

  // Summed labels follow the output's, in order of first appearance.
  Labels order = out;
  for (const Labels& a : axes)
    for (Label l : a)
      if (std::find(order.begin(), order.end(), l) == order.end()) order.push_back(l);
  std::map<Label, int64_t> sizes;
  for (size_t i = 0; i < axes.size(); ++i)
    for (size_t k = 0; k < axes[i].size(); ++k) {
      const int64_t n = ops[i]->shape[k];
      auto [it, fresh] = sizes.emplace(axes[i][k], n);
      if (fresh || n == 1 || it->second == n) continue;
      if (it->second != 1)
        return invalid(absl::StrCat("label ", label_name(axes[i][k]), " has sizes ", it->second, " and ", n));
      it->second = n;
    }

  // Every operand permuted to `order`, size-1 axes for the labels it lacks; one broadcast product.
  Shape full;
  for (Label l : order) full.push_back(sizes[l]);
  if (absl::Status s = check_grid(full); !s.ok()) return s;
  UOpRef product;
  for (size_t i = 0; i < ops.size(); ++i) {
    std::vector<int64_t> perm;
    Shape shape;
    for (Label l : order) {
      auto at = std::find(axes[i].begin(), axes[i].end(), l);
      if (at == axes[i].end()) {
        shape.push_back(1);
        continue;
      }
      perm.push_back(at - axes[i].begin());
      shape.push_back(ops[i]->shape[perm.back()]);
    }
    PG_ASSIGN(permuted, permute(ops[i], perm));
    PG_ASSIGN(placed, reshape(permuted, shape));
    PG_ASSIGN(spread, broadcast_to(placed, full));
    if (!product) {
      product = spread;
      continue;
    }
    PG_ASSIGN(next, alu(Ops::MUL, {product, spread}));
    product = next;
  }
  if (order.size() == out.size()) return product;
  std::vector<int64_t> summed;
  for (size_t k = out.size(); k < order.size(); ++k) summed.push_back(static_cast<int64_t>(k));
  return sum(product, summed, false);
}

}  // namespace polygrad::frontend
