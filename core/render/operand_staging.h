// Which loads of a register-tiled GPU kernel to stage through block-shared memory, chunk by
// chunk of its reduction loop (the classic shared-memory matmul).
//
// In a kernel whose tiles go in squares (LinearKernel::tile_square), the threads of one block
// compute one square of tiles. A load inside the reduction loop whose index depends on the tile's
// row but not its column (the left operand of a matmul) reads, across the block, only the
// square's rows: every element is read by the tile_square threads of a row of tiles. Staged, the
// block reads each element from global memory once per chunk, all threads together, and the
// threads then read it from shared memory. The same holds for a load by column (the right
// operand).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/codegen/linearize.h"

namespace polygrad {

struct StagedLoad {
  const UOp* load;
  bool by_row;  // its index follows the tile's row (and not its column); else the column
  // In the fill, consecutive threads take consecutive chunk positions (the reduction index) when
  // that is the stride-1 direction in memory, else consecutive rows or columns.
  bool chunk_fastest;
};

struct StagingPlan {
  size_t loop_at;          // position in LinearKernel::ops of the reduction loop's RANGE
  int64_t trip;            // its trip count, at least `chunk` (the last chunk may be shorter)
  int64_t chunk;           // reduction iterations staged at once
  int64_t tile;            // outputs per tile side (the lane loops' trip count)
  int64_t square;          // tiles per square side
  int64_t outer_id, row_id, col_id, reduce_id;  // range ids
  std::vector<StagedLoad> loads;
};

// The reduction iterations staged at once: each thread then fills chunk x tile x square /
// square^2 elements per operand (4 for the CUDA shapes).
inline constexpr int64_t kStageChunk = 16;

// The plan for `k` on blocks of `block_threads` threads, or nothing when no load can be staged:
// the kernel is not tiled in squares of `block_threads` tiles,
// its reduction loop's trip count is not a constant of at least kStageChunk, or no load in the
// loop depends on the reduction and on exactly one of the row or the column, through integer
// index arithmetic by constants whose value is the same for every tile of the square's row
// (or column).
std::optional<StagingPlan> plan_staging(const LinearKernel& k, int64_t block_threads);

}  // namespace polygrad
