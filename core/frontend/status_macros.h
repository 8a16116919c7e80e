// Early return on error inside functions that return absl::Status or absl::StatusOr.
#pragma once

#define PG_CONCAT_INNER(a, b) a##b
#define PG_CONCAT(a, b) PG_CONCAT_INNER(a, b)
#define PG_ASSIGN(lhs, expr) PG_ASSIGN_IMPL(PG_CONCAT(pg_status_or_, __LINE__), lhs, expr)
#define PG_ASSIGN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                   \
  if (!tmp.ok()) return tmp.status();  \
  auto lhs = *std::move(tmp)
