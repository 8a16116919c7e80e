// The emission of a column panel (core/render/panel.h): its array, the copy at the top of each
// outer iteration, and the replaced load's read from it.
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/render/cstyle_emitter.h"
#include "core/render/index_pruning.h"

namespace polygrad {

// A target without panels renders every load in place.
void CStyleRenderer::Emitter::plan_panel_for(const LinearKernel& k) {
  if (!t_.has_panels()) return;
  panel_ = plan_panel(k);
  if (!panel_) return;
  const PanelPlan& p = *panel_;
  staged_element_[p.load] = absl::StrFormat("pg_panel[r%d * %d + r%d]", p.reduce_id, p.cols, p.col_id);
  skip_unread_index_math(k, {p.load}, skipped_);
}

// The array (declared before the outer loop) and, inside it, the copy: element (k, c) of the
// panel is the load's value at reduction step k and lane c in this outer iteration.
std::vector<std::string> CStyleRenderer::Emitter::panel_fill(const std::string& outer) {
  const PanelPlan& p = *panel_;
  const std::unordered_map<int64_t, std::string> ranges{
      {p.outer_id, outer}, {p.reduce_id, "pg_pk"}, {p.col_id, "pg_pc"}};
  return {
      absl::StrFormat("for (int64_t pg_pk = 0; pg_pk < %d; pg_pk++)", p.trip),
      absl::StrFormat("  for (int64_t pg_pc = 0; pg_pc < %d; pg_pc++)", p.cols),
      absl::StrFormat("    pg_panel[pg_pk * %d + pg_pc] = %s[%s];", p.cols, plain_name(*p.load->src[0]),
                      inline_index(*p.load->src[1], ranges)),
  };
}

}  // namespace polygrad
