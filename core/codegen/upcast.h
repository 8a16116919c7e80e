// Register tiling for reduce kernels. An output axis r of size N is split as r' * T + u, where u
// is an "upcast" range of small size T that the linearizer places innermost — inside the
// reduction's loop, accumulating into an array of T. The reduction then streams its operands
// once per tile instead of once per output element, and the u loop (contiguous, constant trip
// count) is what the C compiler vectorizes. Matmul gets a 2-D tile (rows x columns).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/ir/uop.h"

namespace polygrad {

struct Upcast {
  UOpRef sink;
  std::vector<int64_t> upcast_ranges;  // ids of the ranges the linearizer must place innermost
};

// One register tiling of a kernel: what a tuning search varies (core/engine/tuning.h). A zero
// field takes the heuristic's value; a factor that does not divide its axis is not used.
struct UpcastChoice {
  int64_t cols = 0;   // vector lanes along the innermost output axis, when a reduction reads it contiguously
  int64_t rows = 0;   // rows of the tile sharing each of those column loads (1: none)
  int64_t lanes = 0;  // otherwise, partial sums side by side along the reduction
  int64_t tile = 0;   // and output axes tiled around them: 1 none, 2 by two, 4 by four and two
  bool operator==(const UpcastChoice&) const = default;
  // "cols=16 rows=6 lanes=0 tile=0"; decode accepts exactly what encode writes for the factors
  // upcast_candidates tries (cols up to 64, rows up to 16, cols x rows up to 512, lanes up to
  // 16, tile up to 4).
  std::string encode() const;
  static std::optional<UpcastChoice> decode(std::string_view text);
};

// The largest matmul-shaped tile the heuristic picks: what the target's vector registers hold as
// accumulators with room for the operands. The default fits AVX2's 16 registers of 8 floats
// (docs/PIPELINE.md, "The CPU's register tiles: what was measured").
struct TileLimits {
  int64_t cols = 16;
  int64_t rows = 6;
  // Accumulators of a tile whose columns are a power of two: rows are cut to accumulators / cols.
  int64_t accumulators = 96;
  bool operator==(const TileLimits&) const = default;
};
// 32 registers of 16 floats (AVX-512): 24 of them accumulators (6 x 64, else 4 x 64), 8 left for
// the column vectors and the broadcast row value. All 32 as accumulators (8 x 64) spills: on an AMD
// EPYC (Zen 4) a 1024^2 matmul took 26.6 ms on one core against 19.8 (6 x 64) and 20.6 (4 x 64),
// and a matmul reducing 10 values 150 us against 26 (docs/PIPELINE.md).
inline constexpr TileLimits kWideTiles{64, 8, 384};

// A matmul whose column operand is larger than kPanelMinOperandBytes, with at least
// kPanelMinRowTiles row tiles and kPanelMinColumnTiles column tiles (the threads split those:
// fewer would leave cores of a larger machine idle), walks its column tiles outermost, and the CPU renderer copies the
// operand's panel for the current column tile (at most kPanelBytes: it lives on the stack of the
// thread running the kernel, and in its core's L2 cache) into contiguous memory once
// (render/panel.h). Strided, every reduction step read the operand from a new 4 KiB page.
inline constexpr int64_t kPanelBytes = 256 << 10;
inline constexpr int64_t kPanelMinOperandBytes = 512 << 10;
inline constexpr int64_t kPanelMinRowTiles = 8;
inline constexpr int64_t kPanelMinColumnTiles = 8;

// The kernel with its register tiles (the heuristic's within `limits`, or `choice`'s where it
// sets a field).
Upcast apply_upcasts(const UOpRef& sink, const UpcastChoice& choice = {}, const TileLimits& limits = {});

// The distinct tilings worth timing for a kernel, the heuristic's (within `limits`) first; empty
// when the kernel gets none (nothing to tune).
std::vector<UpcastChoice> upcast_candidates(const UOpRef& sink, const TileLimits& limits = {});

}  // namespace polygrad
