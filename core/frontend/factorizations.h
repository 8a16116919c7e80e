// Matrix factorizations of the last two axes (a batch of matrices over the leading ones), as lazy
// graph built from matmuls, reductions and selects, so they run on every device and are
// differentiable. Each returns one factor, named by `factor`, so a wire node is one tensor; the
// daemon shares the work of factors of one matrix built in one request (equal subgraphs are one).
// Float input only.
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/ir/uop.h"

namespace polygrad::frontend {

// The most Householder reflections (rows - 1) and Jacobi rotations (sweeps x cols x (cols - 1) / 2)
// one factorization is built from: each is a few graph nodes, and these are meant for small
// matrices.
inline constexpr int64_t kMaxReflections = 4096;
inline constexpr int64_t kMaxRotations = 8192;

// torch.linalg.qr's reduced (Q, R) of an (m, n) matrix, k = min(m, n): `factor` "q" (m, k) or "r"
// (k, n), from min(m - 1, n) Householder reflections with LAPACK's signs (R[j, j] is minus the sign
// of the column's leading element times its norm), so the factors match torch's.
absl::StatusOr<UOpRef> qr(const UOpRef& x, std::string_view factor);

// The reduced SVD of an (m, n) matrix, k = min(m, n): `factor` "u" (m, k), "s" (k) or "vh" (k, n),
// by one-sided Jacobi rotations (Hestenes): `sweeps` (1 to 64) passes over every column pair of the
// wider orientation. Singular values descending; singular vectors are unique up to sign.
absl::StatusOr<UOpRef> svd(const UOpRef& x, int64_t sweeps, std::string_view factor);

}  // namespace polygrad::frontend
