// One render of a CStyleRenderer: the names given to emitted nodes and the body being written.
// Not a public header: only core/render includes it. Its work is spread over files by job:
//   cstyle.cpp              the op -> text table and the loop emission (run)
//   cstyle_vector_loads.cpp the vector loads of unrolled upcast loops
//   cstyle_staging.cpp      the emission of operand staging through shared memory
//                           (which loads: operand_staging.h; the index math it leaves unread:
//                           index_pruning.h)
//   cstyle_panel.cpp        the emission of a CPU matmul's column panel (which: panel.h)
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/status/statusor.h"
#include "core/codegen/linearize.h"
#include "core/render/cstyle.h"
#include "core/render/operand_staging.h"
#include "core/render/panel.h"

namespace polygrad {

class CStyleRenderer::Emitter {
 public:
  explicit Emitter(const CStyleRenderer& target) : t_(target) {}

  absl::StatusOr<std::string> run(const LinearKernel& k);

 private:
  // cstyle.cpp: names and the op -> expression table.
  std::string name(const UOpRef& u);
  std::string plain_name(const UOp& u);
  std::string render_const(const UOp& c) const;
  std::string reduce_identity(Ops op, DType dt) const;
  absl::StatusOr<std::string> expression(const UOp& n);
  std::string half_bits(const UOpRef& u);
  std::string bitcast(const UOpRef& x, DType dt);
  absl::StatusOr<std::string> raw_expression(const UOp& n);
  void skip_absorbed(const LinearKernel& k);

  // cstyle_vector_loads.cpp
  std::vector<std::string> vector_loads(const LinearKernel& k, size_t at);
  void add_terms(const UOp* u, std::vector<const UOp*>& out) const;
  void drop_reader(const UOp* u, const std::unordered_map<const UOp*, size_t>& where,
                   std::unordered_map<const UOp*, int>& readers);
  static bool multiple_of(const UOp& u, int64_t m);

  // cstyle_staging.cpp
  void plan_staging_for(const LinearKernel& k);
  std::vector<std::string> staged_loop_open(const std::string& r);
  std::string inline_index(const UOp& u, const std::unordered_map<int64_t, std::string>& ranges) const;

  // cstyle_panel.cpp
  void plan_panel_for(const LinearKernel& k);
  std::vector<std::string> panel_fill(const std::string& outer);

  const CStyleRenderer& t_;
  // Nodes every user of which renders without them (the scaling inside a natural exp or log; a
  // 16-bit load or bitcast whose users all want its bits, see half_bits): never emitted, since
  // an unused variable is a warning NVRTC reports.
  std::unordered_set<const UOp*> absorbed_;
  std::unordered_map<const UOp*, std::string> names_;
  // A load that reads its lane of a vector load emitted before its loop: the element's expression.
  std::unordered_map<const UOp*, std::string> vector_lane_;
  std::unordered_set<size_t> skipped_;  // positions in the kernel's ops not to emit
  std::optional<StagingPlan> staging_;
  // A staged load: the expression reading this thread's element from shared memory.
  std::unordered_map<const UOp*, std::string> staged_element_;
  // A staged load by column: the address of its tile's first column in shared memory.
  std::unordered_map<const UOp*, std::string> staged_vector_base_;
  std::optional<PanelPlan> panel_;
  int next_var_ = 0;
  int next_vec_ = 0;
};

}  // namespace polygrad
