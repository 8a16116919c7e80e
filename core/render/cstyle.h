// The C-family renderer: one table from linearized ops to C expressions and statements, shared
// by every target whose language is C-like (tinygrad's renderer/cstyle.py is the model). A
// target is a small subclass that overrides the hooks below; everything else (names, constants,
// the trap-free integer division, 16-bit floats stored as bits and computed in float, array
// accumulators for upcast lanes) is the base's, so C and CUDA cannot drift apart.
//
// Renderers are immutable: render() keeps its state on the stack, so one instance can serve
// every thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/codegen/linearize.h"

namespace polygrad {

class CStyleRenderer {
 public:
  virtual ~CStyleRenderer() = default;

  absl::StatusOr<std::string> render(const LinearKernel& kernel) const;

  // The C type of a value of `dt` in a variable (16-bit floats compute in float) and in memory
  // (16-bit floats are stored as their bits).
  std::string value_type(DType dt) const;
  std::string storage_type(DType dt) const;

 protected:
  // Everything before the kernel: includes or typedefs, the 16-bit float conversions
  // pg_h2f/pg_f2h/pg_bf2f/pg_f2bf, the rounding helpers pg_rh/pg_rbf, the exact bit
  // reinterpretations pg_f2u/pg_u2f (float <-> uint32_t) and pg_d2u/pg_u2d (double <->
  // uint64_t), and the division helpers pg_idiv_<sfx>/pg_mod_<sfx> (see divmod_helpers).
  virtual std::string prelude() const = 0;
  // The kernel's signature and opening lines, up to the first statement of its body; the
  // parameters must be bound to the names b0, b1, ... (b0 is the output, the others read-only).
  virtual std::string kernel_open(const LinearKernel& kernel) const = 0;
  // The loop header of the outer range `r` (LinearKernel::outer_range_id), whose trip count is
  // `end`: the loop a runtime spreads over threads.
  virtual std::string outer_loop(const std::string& r, const std::string& end) const = 0;
  // The line asking the compiler to unroll the loop that follows completely. Upcast lanes rely on
  // it: only an unrolled lane loop lets the compiler keep an array accumulator in (vector)
  // registers instead of memory, which is most of the point of a register tile.
  virtual std::string unroll_pragma(int64_t trip_count) const = 0;
  // The line for an innermost upcast loop that calls a math function (exp, log, sin): default,
  // unroll_pragma. A target whose compiler vectorises those calls only in loops (clang maps them
  // to libmvec in its loop vectorizer, never in straight-line code) asks for that instead.
  virtual std::string math_lane_pragma(int64_t trip_count) const { return unroll_pragma(trip_count); }
  // The target's spelling of a scalar dtype (default: dtype_c_type).
  virtual const char* scalar_type(DType dt) const;
  // A math function of a float value, in the precision of `dt` (default: C99's fnf for float
  // and half types, fn for float64).
  virtual std::string math_call(const char* fn, DType dt, const std::string& x) const;
  // -x for a value of `dt` (default: C's unary minus). Integer products by -1 and differences
  // from 0 come here too, so a target can keep every integer negation in one spelling.
  // A space keeps a negative literal's sign from forming C's `--` with the minus.
  virtual std::string negate(DType dt, const std::string& x) const {
    return absl::StrCat(x.starts_with('-') ? "(- " : "(-", x, ")");
  }

  // Cooperative reductions, for targets with warps (the default has none). `lane_ranges` lists the
  // reduction loops whose iterations the `group_lanes` threads of a group (a warp, or a block of
  // warps) share: when it is not empty, each outer iteration is computed by one group, the outer
  // loop header is `group_outer_loop`, each listed loop's header is `lane_loop`, `group_combine`
  // follows the loop (after it every lane holds the whole result, bit for bit the same), and stores
  // are prefixed with `lane_store_guard` (one lane writes).
  virtual std::vector<int64_t> lane_ranges(const LinearKernel&) const { return {}; }
  virtual int group_lanes(const LinearKernel&) const { return 1; }
  virtual std::string group_outer_loop(const std::string& r, const std::string& end, int lanes) const {
    return outer_loop(r, end);
  }
  virtual std::string lane_loop(const std::string& r, const std::string& end, int lanes) const { return ""; }
  virtual std::string group_combine(const std::string& acc, Ops op, const std::string& type, int lanes) const {
    return "";
  }
  virtual std::string lane_store_guard() const { return ""; }

  // Vector loads, for targets that have them (has_vector_loads; the default has none): an expression loading
  // `bytes` bytes (8 or 16) from `address`, which is aligned to `bytes`, as a value whose
  // elements `element_type` pointers can index; empty when the target cannot. The emitter uses
  // it for a load inside an unrolled upcast loop of 2 or 4 whose index is the loop variable plus
  // a multiple of the trip count (buffers start aligned to more than 16 bytes).
  virtual bool has_vector_loads() const { return false; }
  virtual std::string vector_load(size_t bytes, const std::string& address) const { return ""; }

  // Block-shared memory, for targets that have it (the default has none): the threads of a block
  // (0: no shared memory), a shared array's declaration, the barrier every thread of a block must
  // reach, and the thread's index in its block. With it, the loads of a register-tiled kernel that
  // tiles in squares of `block_threads` tiles are staged through shared memory a chunk of the
  // reduction at a time (core/render/operand_staging.h).
  virtual int block_threads() const { return 0; }
  virtual std::string shared_array(const std::string& type, const std::string& name, int64_t elements) const {
    return "";
  }
  virtual std::string block_barrier() const { return ""; }
  virtual std::string thread_in_block() const { return ""; }

  // Column panels (core/render/panel.h), for a target whose kernel runs as a plain function on a
  // thread with a full stack (has_panels; the default has none): the declaration of a panel
  // array of `elements` on the stack, aligned for its vector loads.
  virtual bool has_panels() const { return false; }
  virtual std::string panel_array(const std::string& type, const std::string& name, int64_t elements) const {
    return "";
  }

  // The integer division and modulo helpers for every integer type, each function declared with
  // `qualifiers` ("static inline" in C). Division by zero yields 0 and MIN / -1 wraps.
  static std::string divmod_helpers(const char* qualifiers);

 private:
  class Emitter;
};

}  // namespace polygrad
