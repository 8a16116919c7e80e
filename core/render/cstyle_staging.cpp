// The emission of operand staging (core/render/operand_staging.h): the staged loads' reads from
// shared memory, and the chunk loop whose threads fill it.
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/render/cstyle_emitter.h"
#include "core/render/index_pruning.h"

namespace polygrad {

// Plans the operand staging of `k` when the target has shared memory and blocks of one square
// of tiles: the element each staged load reads from shared memory, and its index computation,
// which nothing reads any more, skipped.
void CStyleRenderer::Emitter::plan_staging_for(const LinearKernel& k) {
  if (t_.block_threads() <= 0) return;
  staging_ = plan_staging(k, t_.block_threads());
  if (!staging_) return;
  const StagingPlan& p = *staging_;
  const int64_t side = p.square * p.tile;  // rows (or columns) of the square
  const std::string outer = absl::StrCat("r", p.outer_id), chunk_pos = absl::StrFormat("(r%d - pg_k)", p.reduce_id);
  for (size_t i = 0; i < p.loads.size(); ++i) {
    const StagedLoad& l = p.loads[i];
    if (l.by_row) {
      staged_element_[l.load] = absl::StrFormat("pg_s%d[((%s %% %d) / %d * %d + r%d) * %d + %s]", i, outer,
                                                p.square * p.square, p.square, p.tile, p.row_id, p.chunk, chunk_pos);
    } else {  // the tile's columns are consecutive from its first: a vector read can take them
      staged_vector_base_[l.load] =
          absl::StrFormat("pg_s%d + %s * %d + (%s %% %d) * %d", i, chunk_pos, side, outer, p.square, p.tile);
      staged_element_[l.load] = absl::StrFormat("(%s)[r%d]", staged_vector_base_[l.load], p.col_id);
    }
  }
  std::unordered_set<const UOp*> index_unread;  // a staged load reads shared memory instead
  for (const StagedLoad& l : p.loads) index_unread.insert(l.load);
  skip_unread_index_math(k, index_unread, skipped_);
}

// Opens the chunk loop around the staged reduction loop: every thread of the block helps fill
// each staged operand's chunk, between two barriers (the first keeps a fill from overwriting
// what slower threads still read of the previous chunk, the second lets no thread read before
// the fill is complete). Thread e of the fill takes chunk element e, e + block_threads, ...
// The last line opens the staged reduction loop `r` itself, over the chunk.
std::vector<std::string> CStyleRenderer::Emitter::staged_loop_open(const std::string& r) {
  const StagingPlan& p = *staging_;
  const int64_t side = p.square * p.tile, elements = side * p.chunk, block = p.square * p.square;
  std::vector<std::string> out;
  for (size_t i = 0; i < p.loads.size(); ++i)
    out.push_back(t_.shared_array(t_.storage_type(p.loads[i].load->dtype), absl::StrCat("pg_s", i), elements));
  out.push_back(absl::StrFormat("for (int64_t pg_k = 0; pg_k < %d; pg_k += %d) {", p.trip, p.chunk));
  out.push_back(absl::StrCat("  ", t_.block_barrier()));
  const std::string base = absl::StrFormat("r%d / %d * %d", p.outer_id, block, block);
  for (size_t i = 0; i < p.loads.size(); ++i) {
    const StagedLoad& l = p.loads[i];
    // pg_q: the row (or column) in the square, pg_c: the position in the chunk.
    out.push_back(absl::StrFormat("  for (int64_t pg_e = %s; pg_e < %d; pg_e += %d) {", t_.thread_in_block(),
                                  elements, block));
    out.push_back(l.chunk_fastest ? absl::StrFormat("    const int64_t pg_q = pg_e / %d, pg_c = pg_e %% %d;", p.chunk, p.chunk)
                                  : absl::StrFormat("    const int64_t pg_q = pg_e %% %d, pg_c = pg_e / %d;", side, side));
    // The index of the first tile of the row (or column) of tiles holding pg_q: the load's
    // value is the same for all of them (plan_staging checked).
    std::unordered_map<int64_t, std::string> ranges{
        {p.outer_id, absl::StrFormat("(%s + pg_q / %d%s)", base, p.tile, l.by_row ? absl::StrCat(" * ", p.square) : "")},
        {l.by_row ? p.row_id : p.col_id, absl::StrFormat("(pg_q %% %d)", p.tile)},
        {p.reduce_id, "(pg_k + pg_c)"}};
    // A last chunk shorter than the others fills only its part.
    const std::string guard =
        p.trip % p.chunk == 0 ? "" : absl::StrFormat("if (pg_k + pg_c < %d) ", p.trip);
    out.push_back(absl::StrFormat("    %spg_s%d[%s] = %s[%s];", guard, i, l.by_row ? absl::StrFormat("pg_q * %d + pg_c", p.chunk)
                                                                        : absl::StrFormat("pg_c * %d + pg_q", side),
                                  plain_name(*l.load->src[0]), inline_index(*l.load->src[1], ranges)));
    out.push_back("  }");
  }
  out.push_back(absl::StrCat("  ", t_.block_barrier()));
  out.push_back(absl::StrCat(
      "  ", p.trip % p.chunk == 0
                ? absl::StrFormat("for (int64_t %s = pg_k; %s < pg_k + %d; %s++) {", r, r, p.chunk, r)
                : absl::StrFormat("for (int64_t %s = pg_k; %s < pg_k + %d && %s < %d; %s++) {", r, r, p.chunk, r,
                                  p.trip, r)));
  return out;
}

// An index expression (the node kinds plan_staging accepts) written out whole, its ranges
// replaced by `ranges`.
std::string CStyleRenderer::Emitter::inline_index(const UOp& u, const std::unordered_map<int64_t, std::string>& ranges) const {
  if (u.op == Ops::CONST) return render_const(u);
  if (u.op == Ops::RANGE) return ranges.at(u.arg_int());
  const char* op = u.op == Ops::ADD ? "+" : u.op == Ops::SUB ? "-" : u.op == Ops::MUL ? "*" : u.op == Ops::IDIV ? "/" : "%";
  return absl::StrFormat("(%s %s %s)", inline_index(*u.src[0], ranges), op, inline_index(*u.src[1], ranges));
}

}  // namespace polygrad
