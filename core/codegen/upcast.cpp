#include "core/codegen/upcast.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <unordered_set>

#include "core/ir/symbolic.h"

namespace polygrad {
namespace {

// Ranges a REDUCE loops over; every other RANGE is an output axis.
std::unordered_set<const UOp*> reduce_ranges(const std::vector<const UOp*>& nodes) {
  std::unordered_set<const UOp*> out;
  for (const UOp* n : nodes)
    if (n->op == Ops::REDUCE)
      for (size_t i = 1; i < n->src.size(); ++i) out.insert(n->src[i].get());
  return out;
}

// Coefficient of `r` in an affine index (0 when it does not appear linearly).
int64_t coefficient(const UOpRef& index, const UOp* r) {
  if (index.get() == r) return 1;
  if (index->op == Ops::ADD) return coefficient(index->src[0], r) + coefficient(index->src[1], r);
  if (index->op == Ops::MUL && index->src[1]->op == Ops::CONST && index->src[0].get() == r)
    return index->src[1]->arg_int();
  return 0;
}

// Whether the range `r` appears anywhere in a load's index or gate (divisions included).
bool depends_on(const UOp* load, const UOp* r) {
  return std::any_of(load->src.begin() + 1, load->src.end(), [&](const UOpRef& s) { return reaches(s, r); });
}

int64_t pick_factor(int64_t size, const std::vector<int64_t>& choices) {
  for (int64_t t : choices)
    if (size % t == 0 && size >= t) return t;
  return 1;
}

// Range r's outer part when split into `factor` lanes: size / factor iterations, stopping (when r
// may stop early, lower.h) once the lanes passed r's stop.
UOpRef outer_part(const UOp* r, int64_t factor) {
  std::vector<UOpRef> src{const_int(r->src[0]->arg_int() / factor)};
  if (r->src.size() > 1)
    src.push_back(uop(Ops::IDIV, kIndexDType, {uop(Ops::ADD, kIndexDType, {r->src[1], const_int(factor - 1)}),
                                               const_int(factor)}));
  return uop(Ops::RANGE, kIndexDType, std::move(src), r->arg_int());
}

// Splits output range r as r' * factor + u, u a new upcast lane; returns r'.
UOpRef split_range(Upcast& out, const UOp* r, int64_t factor, int64_t& max_id) {
  UOpRef outer_r = outer_part(r, factor);
  UOpRef lane = uop(Ops::RANGE, kIndexDType, {const_int(factor)}, ++max_id);
  UOpRef expr = uop(Ops::ADD, kIndexDType, {uop(Ops::MUL, kIndexDType, {outer_r, const_int(factor)}), lane});
  out.sink = substitute(out.sink, r, expr);
  out.upcast_ranges.push_back(lane->arg_int());
  return outer_r;
}

// The same range under another id (the linearizer nests loops by id).
UOpRef renumbered(const UOpRef& r, int64_t id) { return uop(Ops::RANGE, r->dtype, r->src, id); }

// Whether a matmul tile should walk its column tiles in the outermost loop, so that the renderer
// copies the column operand's panel (its rows along the reduction, the tile's columns) once per
// column tile into contiguous memory and every row tile reads it from there (render/panel.h).
// The operand must be one the row tiles share (it does not move with them), read contiguously
// along the columns, over one reduction without an early stop; its panel must fit kPanelBytes;
// and the operand must be too large to stay in a core's cache, with enough row tiles to pay for
// the copy and enough column tiles for the threads, which split them. Only a kernel whose output
// axes are exactly rows and columns is reordered.
bool columns_outermost(const std::vector<const UOp*>& nodes, const std::vector<const UOp*>& outer,
                       const std::unordered_set<const UOp*>& owned, const UOp* row_range, int64_t rows,
                       const UOp* inner, int64_t cols) {
  if (row_range == nullptr || outer.size() != 2 || owned.size() != 1) return false;
  const UOp* k = *owned.begin();
  if (k->src.size() != 1 || row_range->src.size() != 1 || inner->src.size() != 1) return false;
  const int64_t trip = k->src[0]->arg_int(), n = inner->src[0]->arg_int();
  if (n / cols < kPanelMinColumnTiles || row_range->src[0]->arg_int() / rows < kPanelMinRowTiles) return false;
  for (const UOp* l : nodes) {
    if (l->op != Ops::LOAD || l->src.size() != 2 || coefficient(l->src[1], inner) != 1 || !depends_on(l, k) ||
        depends_on(l, row_range))
      continue;
    const int64_t item = static_cast<int64_t>(dtype_itemsize(l->dtype));
    if (trip * cols * item <= kPanelBytes && trip * n * item >= kPanelMinOperandBytes) return true;
  }
  return false;
}

// Output axes worth a register tile: innermost first, each with some load that does not depend
// on it (that load is then shared by the tile's slots along the axis), at most `count`.
std::vector<std::pair<const UOp*, int64_t>> reuse_axes(const std::vector<const UOp*>& nodes,
                                                        const std::vector<const UOp*>& outer, size_t count,
                                                        const std::vector<int64_t>& factors) {
  std::vector<std::pair<const UOp*, int64_t>> out;
  for (size_t i = outer.size(); i-- > 0 && out.size() < count;) {
    int64_t factor = pick_factor(outer[i]->src[0]->arg_int(), factors);
    if (factor == 1) continue;
    for (const UOp* n : nodes)
      if (n->op == Ops::LOAD && !depends_on(n, outer[i])) {
        out.emplace_back(outer[i], factor);
        break;
      }
  }
  return out;
}

// reduce(v, ..., r) with r read contiguously becomes reduce(reduce(v[r = r' * T + u], ..., r'), u)
// with u an upcast lane: T partial sums accumulate side by side (one vector operation per
// step of r'), and the lanes are combined once at the end.
//
// With a single reduction, output axes are tiled as well (x @ W.T: a tile of rows x columns x
// lanes), so each vector load of x serves several rows of W and the other way round, instead of
// two loads per multiply-add. Lanes shrink to 8 then, to keep the tile in 16 vector registers, or
// (with wide tiles) in 16 of 32: x @ W.T at 128x784x256 took 0.78 ms on one AVX-512 core as 4 x 4
// x 8, 0.90 as 4 x 2 x 8 and 1.08 as 4 x 4 x 16 (its lane sums cost more than its loads save).
Upcast reduce_lanes(const UOpRef& sink, const std::vector<const UOp*>& nodes, int64_t max_id,
                    const std::vector<const UOp*>& outer, const UpcastChoice& choice, const TileLimits& limits) {
  const bool wide = limits.accumulators > TileLimits{}.accumulators;
  Upcast out{sink, {}};
  size_t reductions = 0;
  for (const UOp* n : nodes) reductions += n->op == Ops::REDUCE;
  const std::vector<int64_t> tile_factors =
      choice.tile == 0 || choice.tile == 4 ? std::vector<int64_t>{4, 2} : std::vector<int64_t>{choice.tile};
  auto tile = reductions == 1 && choice.tile != 1 ? reuse_axes(nodes, outer, 2, tile_factors)
                                                  : std::vector<std::pair<const UOp*, int64_t>>{};
  // Lanes take the highest range ids so the linearizer nests them innermost, under the tile's
  // axes: the vector dimension must be the one the compiler sees last.
  int64_t tile_ids = max_id;
  max_id += static_cast<int64_t>(tile.size());
  // One reduction at a time, from the graph as rewritten so far: a reduction reading another
  // (layernorm's variance reads its mean) is rebuilt when that one is split, so the nodes of the
  // original graph no longer name it. Ranges already looked at are skipped (the split keeps the
  // reduced range's id for its outer part).
  std::unordered_set<int64_t> done;
  while (true) {
    const UOp* n = nullptr;
    for (const UOp* m : toposort({out.sink}))
      if (m->op == Ops::REDUCE && !done.count(m->src.back()->arg_int())) {
        n = m;
        break;
      }
    if (n == nullptr) break;
    const UOpRef r = n->src.back();  // a copy: n goes with the graph it is replaced in
    done.insert(r->arg_int());
    int64_t size = r->src[0]->arg_int();
    int64_t lanes = choice.lanes != 0 ? pick_factor(size, {choice.lanes})
                    : tile.empty()    ? pick_factor(size, {16, 8})
                                      : pick_factor(size, {8});
    bool contiguous = false;
    for (const UOp* m : toposort({n->src[0]}))
      if (m->op == Ops::LOAD && coefficient(m->src[1], r.get()) == 1) contiguous = true;
    if (lanes == 1 || !contiguous) continue;
    UOpRef outer_r = outer_part(r.get(), lanes);
    UOpRef lane = uop(Ops::RANGE, kIndexDType, {const_int(lanes)}, ++max_id);
    UOpRef index = uop(Ops::ADD, kIndexDType, {uop(Ops::MUL, kIndexDType, {outer_r, const_int(lanes)}), lane});
    std::vector<UOpRef> inner_src{substitute(n->src[0], r.get(), index)};
    inner_src.insert(inner_src.end(), n->src.begin() + 1, n->src.end() - 1);
    inner_src.push_back(outer_r);
    UOpRef partial = uop(Ops::REDUCE, n->dtype, std::move(inner_src), n->arg);
    UOpRef combined = uop(Ops::REDUCE, n->dtype, {partial, lane}, n->arg);
    done.insert(lane->arg_int());
    out.sink = substitute(out.sink, n, combined);
    // A store inside the reduction's loop (codegen/store_reuse.h) names the old range still.
    out.sink = substitute(out.sink, r.get(), index);
    out.upcast_ranges.push_back(lane->arg_int());
  }
  if (out.upcast_ranges.empty() && tile.empty()) return out;
  // 4 x 2 x 8 lanes at most (4 x 4 x 8 wide); without lanes (a reduction too short to split) a
  // scalar 4 x 4 tile.
  if (!out.upcast_ranges.empty() && tile.size() == 2 && tile[0].second * tile[1].second > (wide ? 16 : 8))
    tile[0].second = 2;
  for (auto [axis, factor] : tile) split_range(out, axis, factor, tile_ids);
  out.sink = graph_rewrite(out.sink, symbolic());
  return out;
}

}  // namespace

Upcast apply_upcasts(const UOpRef& sink, const UpcastChoice& choice, const TileLimits& limits) {
  std::vector<const UOp*> nodes = toposort({sink});
  auto owned = reduce_ranges(nodes);
  if (owned.empty()) return {sink, {}};
  std::vector<const UOp*> outer;
  int64_t max_id = 0;
  for (const UOp* n : nodes) {
    if (n->op != Ops::RANGE) continue;
    max_id = std::max(max_id, n->arg_int());
    if (!owned.count(n)) outer.push_back(n);
  }
  if (outer.empty()) return {sink, {}};
  std::sort(outer.begin(), outer.end(), [](const UOp* a, const UOp* b) { return a->arg_int() < b->arg_int(); });

  // Upcast the innermost output axis only when some load the reduction streams (one that moves
  // with a reduce range) reads it contiguously: then the tile is one vector load per reduction
  // step. A load fixed for the whole reduction does not count: softmax's exp(x - max) sum reads
  // the row maxima contiguously along rows, but x along the reduction, and lanes across rows
  // would gather x with a stride of a row. Otherwise (x @ W.T, row sums) try vector lanes along
  // the reduction itself.
  const UOp* inner = outer.back();
  bool contiguous = false;
  for (const UOp* n : nodes)
    if (n->op == Ops::LOAD && coefficient(n->src[1], inner) == 1 &&
        std::any_of(owned.begin(), owned.end(), [&](const UOp* r) { return depends_on(n, r); }))
      contiguous = true;
  if (!contiguous) return reduce_lanes(sink, nodes, max_id, outer, choice, limits);

  Upcast out{sink, {}};
  const auto within = [](std::vector<int64_t> factors, int64_t most) {
    std::erase_if(factors, [&](int64_t f) { return f > most; });
    return factors;
  };
  const int64_t inner_size = inner->src[0]->arg_int();
  std::vector<int64_t> col_factors = within({64, 32, 16, 8, 4}, limits.cols);
  // An axis that fits the tile whole is taken whole, even when it is no power of two: a conv's
  // 56 output columns are 3.5 AVX-512 vectors, where the largest power-of-two factor (8) makes
  // a tile that streams the input 7 times per weight (measured: docs/PIPELINE.md, "The CPU's
  // register tiles"). A multiple of 4 keeps each vector at least 128 bits full.
  if (inner_size > 8 && inner_size <= limits.cols && inner_size % 4 == 0) col_factors.insert(col_factors.begin(), inner_size);
  int64_t cols = pick_factor(inner_size, choice.cols != 0 ? std::vector<int64_t>{choice.cols} : col_factors);
  if (cols == 1) return reduce_lanes(sink, nodes, max_id, outer, choice, limits);
  // A tile whose last vector is partial keeps to half the accumulators (it measured faster on the
  // conv above); power-of-two tiles up to limits.accumulators.
  const int64_t most_rows = (cols & (cols - 1)) == 0
                                ? std::clamp<int64_t>(limits.accumulators / cols, 1, limits.rows)
                                : std::max<int64_t>(1, limits.cols * limits.rows / 2 / cols);
  // A second, row axis shares each column load across rows: the innermost other output axis
  // that some vector load (one moving with the columns) does not depend on, so that load serves
  // the whole tile. Matmul picks its rows (B does not depend on them); conv picks output channels
  // (the input window does not) over output rows, which would only share a scalar weight. At
  // most limits.rows rows (TileLimits), or most_rows above.
  const UOp* row_range = nullptr;
  int64_t rows = 1;
  const std::vector<int64_t> row_factors =
      choice.rows != 0 ? std::vector<int64_t>{choice.rows} : within({8, 6, 4, 2}, most_rows);
  for (size_t i = outer.size() - 1; choice.rows != 1 && i-- > 0 && row_range == nullptr;) {
    int64_t factor = pick_factor(outer[i]->src[0]->arg_int(), row_factors);
    if (factor == 1) continue;
    for (const UOp* n : nodes)
      if (n->op == Ops::LOAD && depends_on(n, inner) && !depends_on(n, outer[i])) {
        row_range = outer[i];
        rows = factor;
        break;
      }
  }
  const bool panels = columns_outermost(nodes, outer, owned, row_range, rows, inner, cols);
  const UOpRef row_tiles = rows > 1 ? split_range(out, row_range, rows, max_id) : nullptr;
  const UOpRef col_tiles = split_range(out, inner, cols, max_id);
  if (panels) {  // swap the two loops' ids, through one not in use
    const int64_t row_id = row_tiles->arg_int(), col_id = col_tiles->arg_int();
    UOpRef parked = renumbered(row_tiles, ++max_id);
    out.sink = substitute(out.sink, row_tiles.get(), parked);
    out.sink = substitute(out.sink, col_tiles.get(), renumbered(col_tiles, row_id));
    out.sink = substitute(out.sink, parked.get(), renumbered(parked, col_id));
  }
  out.sink = graph_rewrite(out.sink, symbolic());
  return out;
}

std::string UpcastChoice::encode() const {
  char buf[96];
  std::snprintf(buf, sizeof buf, "cols=%lld rows=%lld lanes=%lld tile=%lld", static_cast<long long>(cols),
                static_cast<long long>(rows), static_cast<long long>(lanes), static_cast<long long>(tile));
  return buf;
}

std::optional<UpcastChoice> UpcastChoice::decode(std::string_view text) {
  UpcastChoice c;
  for (auto [name, field] : {std::pair<std::string_view, int64_t*>{"cols=", &c.cols}, {" rows=", &c.rows},
                             {" lanes=", &c.lanes}, {" tile=", &c.tile}}) {
    if (text.substr(0, name.size()) != name) return std::nullopt;
    text.remove_prefix(name.size());
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *field);
    if (ec != std::errc() || *field < 0) return std::nullopt;
    text.remove_prefix(static_cast<size_t>(end - text.data()));
  }
  // Only the factors upcast_candidates tries: a record is data from a shared store, and a larger
  // tile would only make a slower kernel that takes longer to compile.
  if (!text.empty() || c.cols > 64 || c.rows > 16 || c.cols * c.rows > 512 || c.lanes > 16 || c.tile > 4)
    return std::nullopt;
  return c;
}

std::vector<UpcastChoice> upcast_candidates(const UOpRef& sink, const TileLimits& limits) {
  std::vector<UpcastChoice> out;
  // Kept alive: UOps are hash-consed only while an equal one lives, and then pointer equality
  // is structural equality.
  std::vector<Upcast> seen;
  const auto add = [&](const UpcastChoice& c) {
    Upcast u = apply_upcasts(sink, c, limits);
    for (const Upcast& s : seen)
      if (s.sink == u.sink && s.upcast_ranges == u.upcast_ranges) return;  // the same tiling
    seen.push_back(std::move(u));
    out.push_back(c);
  };
  add(UpcastChoice{});
  if (seen[0].upcast_ranges.empty()) return {};  // nothing tiled: nothing to choose
  // Tiles of up to 256 accumulators (16 AVX-512 registers of 16 floats, of 32), and on a target
  // with wide tiles up to its largest.
  const int64_t most_cols = std::max<int64_t>(32, limits.cols);
  const int64_t most = std::max<int64_t>(256, limits.cols * limits.rows);
  for (int64_t cols : {64, 56, 48, 32, 28, 24, 16, 12, 8, 4})
    for (int64_t rows : {1, 2, 4, 6, 8, 12, 16})
      for (int64_t lanes : {16, 8, 4})
        for (int64_t tile : {1, 2, 4})
          if (cols <= most_cols && cols * rows <= most) add(UpcastChoice{cols, rows, lanes, tile});
  return out;
}

}  // namespace polygrad
