#include "core/frontend/factorizations.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/frontend/basic_math.h"
#include "core/frontend/composites.h"
#include "core/frontend/indexing.h"
#include "core/frontend/sorting.h"
#include "core/frontend/status_macros.h"
#include "core/frontend/tensor_ops.h"

namespace polygrad::frontend {
namespace {

using Built = absl::StatusOr<UOpRef>;

absl::Status invalid(const std::string& op, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", what));
}

// `x` float of rank >= 2: its (m, n) and leading shape.
struct Matrix {
  int64_t m, n;
  Shape lead;
};
absl::StatusOr<Matrix> matrix_of(const UOpRef& x, const std::string& op) {
  if (!dtype_is_float(x->dtype)) return invalid(op, absl::StrCat("needs a float matrix, got ", dtype_name(x->dtype)));
  const size_t rank = x->shape.size();
  if (rank < 2) return invalid(op, absl::StrCat("needs a matrix (or a batch of them), got rank ", rank));
  return Matrix{x->shape[rank - 2], x->shape[rank - 1], Shape(x->shape.begin(), x->shape.end() - 2)};
}

Shape with(Shape lead, std::initializer_list<int64_t> last) {
  lead.insert(lead.end(), last);
  return lead;
}

// x[..., r0:r1, c0:c1].
Built block(const UOpRef& x, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  Pairs keep;
  for (size_t i = 0; i + 2 < x->shape.size(); ++i) keep.push_back({0, x->shape[i]});
  keep.push_back({r0, r1});
  keep.push_back({c0, c1});
  return shrink(x, keep);
}

// The last two axes swapped.
Built transposed(const UOpRef& x) {
  std::vector<int64_t> order;
  for (size_t i = 0; i < x->shape.size(); ++i) order.push_back(static_cast<int64_t>(i));
  std::swap(order[order.size() - 1], order[order.size() - 2]);
  return permute(x, order);
}

// a op b with numpy broadcasting (a constant when b is a number).
Built apply(Ops op, const UOpRef& a, const UOpRef& b) {
  PG_ASSIGN(shape, broadcast_shape(a->shape, b->shape));
  PG_ASSIGN(x, broadcast_to(a, shape));
  PG_ASSIGN(y, broadcast_to(b, shape));
  return alu(op, {x, y});
}
Built apply(Ops op, const UOpRef& a, double b) {
  PG_ASSIGN(c, constant(b, a->dtype, a->shape));
  return alu(op, {a, c});
}
Built apply(Ops op, double a, const UOpRef& b) {
  PG_ASSIGN(c, constant(a, b->dtype, b->shape));
  return alu(op, {c, b});
}
Built select(const UOpRef& cond, const UOpRef& a, const UOpRef& b) {
  PG_ASSIGN(shape, broadcast_shape(cond->shape, a->shape));
  PG_ASSIGN(full, broadcast_shape(shape, b->shape));
  PG_ASSIGN(c, broadcast_to(cond, full));
  PG_ASSIGN(x, broadcast_to(a, full));
  PG_ASSIGN(y, broadcast_to(b, full));
  return alu(Ops::WHERE, {c, x, y});
}
Built select(const UOpRef& cond, double a, const UOpRef& b) {
  PG_ASSIGN(c, constant(a, b->dtype, b->shape));
  return select(cond, c, b);
}
// x >= 0, false for NaN (the clients' (x >= 0).where(1, -1)).
Built non_negative(const UOpRef& x) {
  PG_ASSIGN(pos, apply(Ops::CMPLT, 0.0, x));
  PG_ASSIGN(zero, apply(Ops::CMPNE, x, 0.0));
  PG_ASSIGN(is_zero, alu(Ops::NOT, {zero}));
  return alu(Ops::OR, {pos, is_zero});
}
// sum over axis -2, kept.
Built column_sum(const UOpRef& x) { return sum(x, {-2}, true); }

}  // namespace

Built qr(const UOpRef& x, std::string_view factor) {
  const std::string op = "qr";
  if (factor != "q" && factor != "r") return invalid(op, "the factor (composite.mode) is 'q' or 'r'");
  PG_ASSIGN(mat, matrix_of(x, op));
  const int64_t m = mat.m, n = mat.n, k = std::min(m, n), steps = std::min(m - 1, n);
  if (steps > kMaxReflections)
    return invalid(op, absl::StrCat(steps, " Householder reflections, more than ", kMaxReflections,
                                    " (qr is built for small matrices)"));
  PG_ASSIGN(identity, eye(m, m, x->dtype));
  PG_ASSIGN(q0, broadcast_to(identity, with(mat.lead, {m, m})));
  UOpRef q = q0, r = x;
  for (int64_t j = 0; j < steps; ++j) {
    // The reflection v v^T 2 / (v^T v) that zeroes column j below the diagonal.
    PG_ASSIGN(col, block(r, j, m, j, j + 1));  // (..., m - j, 1)
    PG_ASSIGN(alpha, block(col, 0, 1, 0, 1));
    PG_ASSIGN(sq, apply(Ops::MUL, col, col));
    PG_ASSIGN(ss, column_sum(sq));
    PG_ASSIGN(norm, alu(Ops::SQRT, {ss}));
    PG_ASSIGN(up, non_negative(alpha));
    PG_ASSIGN(neg_norm, alu(Ops::NEG, {norm}));
    PG_ASSIGN(signed_norm, select(up, norm, neg_norm));
    PG_ASSIGN(head, apply(Ops::ADD, alpha, signed_norm));  // alpha - beta, beta = -sign(alpha) norm
    PG_ASSIGN(tail, block(col, 1, m - j, 0, 1));
    PG_ASSIGN(v, cat({head, tail}, -2));
    PG_ASSIGN(v2, apply(Ops::MUL, v, v));
    PG_ASSIGN(vv, column_sum(v2));
    PG_ASSIGN(floor, apply(Ops::MAX, vv, 1e-30));
    PG_ASSIGN(ratio, apply(Ops::FDIV, 2.0, floor));
    PG_ASSIGN(vv_nonzero, apply(Ops::CMPNE, vv, 0.0));
    PG_ASSIGN(vv_zero, alu(Ops::NOT, {vv_nonzero}));
    PG_ASSIGN(scale, select(vv_zero, 0.0, ratio));
    PG_ASSIGN(vr, transposed(v));
    PG_ASSIGN(below, block(r, j, m, 0, n));
    PG_ASSIGN(right, block(q, 0, m, j, m));
    PG_ASSIGN(t1, matmul(vr, below));
    PG_ASSIGN(t2, matmul(v, t1));
    PG_ASSIGN(t3, apply(Ops::MUL, scale, t2));
    PG_ASSIGN(below2, apply(Ops::SUB, below, t3));
    PG_ASSIGN(u1, matmul(right, v));
    PG_ASSIGN(u2, matmul(u1, vr));
    PG_ASSIGN(u3, apply(Ops::MUL, scale, u2));
    PG_ASSIGN(right2, apply(Ops::SUB, right, u3));
    if (j == 0) {
      r = below2;
      q = right2;
      continue;
    }
    PG_ASSIGN(above, block(r, 0, j, 0, n));  // rows above j are final
    PG_ASSIGN(left, block(q, 0, m, 0, j));
    PG_ASSIGN(r2, cat({above, below2}, -2));
    PG_ASSIGN(q2, cat({left, right2}, -1));
    r = r2;
    q = q2;
  }
  if (factor == "q") return block(q, 0, m, 0, k);
  PG_ASSIGN(rk, block(r, 0, k, 0, n));
  return triu(rk, 0);
}

Built svd(const UOpRef& x, int64_t sweeps, std::string_view factor) {
  const std::string op = "svd";
  if (factor != "u" && factor != "s" && factor != "vh") return invalid(op, "the factor (composite.mode) is 'u', 's' or 'vh'");
  if (sweeps < 1 || sweeps > 64) return invalid(op, absl::StrCat("sweeps (composite.n) must be 1 to 64, got ", sweeps));
  PG_ASSIGN(mat, matrix_of(x, op));
  if (mat.m < mat.n) {  // x^T = U S Vh, so x = Vh^T S U^T
    PG_ASSIGN(xt, transposed(x));
    if (factor == "s") return svd(xt, sweeps, "s");
    PG_ASSIGN(f, svd(xt, sweeps, factor == "u" ? "vh" : "u"));
    return transposed(f);
  }
  const int64_t m = mat.m, n = mat.n;
  if (sweeps * (n * (n - 1) / 2) > kMaxRotations)
    return invalid(op, absl::StrCat(sweeps, " sweeps over ", n, " columns are ", sweeps * (n * (n - 1) / 2),
                                    " rotations, more than ", kMaxRotations, " (svd is built for small matrices)"));
  PG_ASSIGN(identity, eye(n, n, x->dtype));
  PG_ASSIGN(v0, broadcast_to(identity, with(mat.lead, {n, n})));
  PG_ASSIGN(positions, arange(n, DType::Int32));
  UOpRef u = x, v = v0;
  // Rotating columns p and q of u and v by (c, s): column p becomes c p - s q, column q s p + c q.
  auto rotate = [&](const UOpRef& a, const UOpRef& is_p, const UOpRef& is_q, int64_t p, int64_t q, const UOpRef& c,
                    const UOpRef& s) -> Built {
    const int64_t rows = a->shape[a->shape.size() - 2];
    PG_ASSIGN(ap, block(a, 0, rows, p, p + 1));
    PG_ASSIGN(aq, block(a, 0, rows, q, q + 1));
    PG_ASSIGN(cp, apply(Ops::MUL, c, ap));
    PG_ASSIGN(sq, apply(Ops::MUL, s, aq));
    PG_ASSIGN(new_p, apply(Ops::SUB, cp, sq));
    PG_ASSIGN(sp, apply(Ops::MUL, s, ap));
    PG_ASSIGN(cq, apply(Ops::MUL, c, aq));
    PG_ASSIGN(new_q, apply(Ops::ADD, sp, cq));
    PG_ASSIGN(keep_q, select(is_q, new_q, a));
    return select(is_p, new_p, keep_q);
  };
  for (int64_t sweep = 0; sweep < sweeps; ++sweep)
    for (int64_t p = 0; p + 1 < n; ++p)
      for (int64_t q = p + 1; q < n; ++q) {
        PG_ASSIGN(up, block(u, 0, m, p, p + 1));
        PG_ASSIGN(uq, block(u, 0, m, q, q + 1));
        PG_ASSIGN(pp, apply(Ops::MUL, up, up));
        PG_ASSIGN(qq, apply(Ops::MUL, uq, uq));
        PG_ASSIGN(pq, apply(Ops::MUL, up, uq));
        PG_ASSIGN(alpha, column_sum(pp));
        PG_ASSIGN(beta, column_sum(qq));
        PG_ASSIGN(gamma, column_sum(pq));
        // The rotation that zeroes gamma; (c, s) = (1, 0) when the columns are already orthogonal.
        PG_ASSIGN(gamma_nonzero, apply(Ops::CMPNE, gamma, 0.0));
        PG_ASSIGN(flat, alu(Ops::NOT, {gamma_nonzero}));
        PG_ASSIGN(safe_gamma, select(flat, 1.0, gamma));
        PG_ASSIGN(two_gamma, apply(Ops::MUL, safe_gamma, 2.0));
        PG_ASSIGN(diff, apply(Ops::SUB, beta, alpha));
        PG_ASSIGN(zeta, apply(Ops::FDIV, diff, two_gamma));
        PG_ASSIGN(zeta_up, non_negative(zeta));
        PG_ASSIGN(one, constant(1.0, zeta->dtype, zeta->shape));
        PG_ASSIGN(minus_one, constant(-1.0, zeta->dtype, zeta->shape));
        PG_ASSIGN(sign, select(zeta_up, one, minus_one));
        PG_ASSIGN(zeta_abs, abs(zeta));
        PG_ASSIGN(zeta2, apply(Ops::MUL, zeta, zeta));
        PG_ASSIGN(hyp2, apply(Ops::ADD, 1.0, zeta2));
        PG_ASSIGN(hyp, alu(Ops::SQRT, {hyp2}));
        PG_ASSIGN(den, apply(Ops::ADD, zeta_abs, hyp));
        PG_ASSIGN(t, apply(Ops::FDIV, sign, den));
        PG_ASSIGN(t2, apply(Ops::MUL, t, t));
        PG_ASSIGN(ct2, apply(Ops::ADD, 1.0, t2));
        PG_ASSIGN(ct, alu(Ops::SQRT, {ct2}));
        PG_ASSIGN(c_rot, apply(Ops::FDIV, 1.0, ct));
        PG_ASSIGN(c, select(flat, 1.0, c_rot));
        PG_ASSIGN(ctr, apply(Ops::MUL, c, t));
        PG_ASSIGN(s, select(flat, 0.0, ctr));
        PG_ASSIGN(p_index, constant(p, DType::Int32, positions->shape));
        PG_ASSIGN(q_index, constant(q, DType::Int32, positions->shape));
        PG_ASSIGN(not_p, alu(Ops::CMPNE, {positions, p_index}));
        PG_ASSIGN(at_p, alu(Ops::NOT, {not_p}));
        PG_ASSIGN(not_q, alu(Ops::CMPNE, {positions, q_index}));
        PG_ASSIGN(at_q, alu(Ops::NOT, {not_q}));
        PG_ASSIGN(u2, rotate(u, at_p, at_q, p, q, c, s));
        PG_ASSIGN(v2, rotate(v, at_p, at_q, p, q, c, s));
        u = u2;
        v = v2;
      }
  PG_ASSIGN(u_sq, apply(Ops::MUL, u, u));
  PG_ASSIGN(norms2, sum(u_sq, {-2}, false));  // (..., n)
  PG_ASSIGN(values, alu(Ops::SQRT, {norms2}));
  PG_ASSIGN(order, sort(values, -1, true, true));
  PG_ASSIGN(sorted, gather(values, -1, order));
  if (factor == "s") return sorted;
  PG_ASSIGN(order_row, reshape(order, with(mat.lead, {1, n})));
  if (factor == "vh") {
    PG_ASSIGN(cols, expand(order_row, with(mat.lead, {n, n})));
    PG_ASSIGN(vs, gather(v, -1, cols));
    return transposed(vs);
  }
  PG_ASSIGN(cols, expand(order_row, with(mat.lead, {m, n})));
  PG_ASSIGN(us, gather(u, -1, cols));
  PG_ASSIGN(s_nonzero, apply(Ops::CMPNE, sorted, 0.0));
  PG_ASSIGN(s_zero, alu(Ops::NOT, {s_nonzero}));
  PG_ASSIGN(safe_s, select(s_zero, 1.0, sorted));
  PG_ASSIGN(denom, reshape(safe_s, with(mat.lead, {1, n})));
  return apply(Ops::FDIV, us, denom);
}

}  // namespace polygrad::frontend
