// The corpus of graphs the CUDA renderer is checked on: every ALU op on every dtype that accepts
// it, every cast and bitcast, constants, movement, reductions, matmuls, composites and gradients,
// built with the frontend. cuda_render_test.cpp compiles every kernel of it with NVRTC;
// cuda_emulation_test.cpp runs every kernel on the host against the CPU path.
#pragma once

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/frontend/composites.h"
#include "core/frontend/math.h"
#include "core/frontend/gradient.h"
#include "core/frontend/tensor_ops.h"
#include "core/ir/uop.h"

namespace polygrad::test_corpus {

namespace fe = frontend;

inline constexpr DType kAllDTypes[] = {DType::Bool,   DType::Int8,   DType::Int16,   DType::Int32,
                                DType::Int64,  DType::UInt8,  DType::UInt16,  DType::UInt32,
                                DType::UInt64, DType::Float16, DType::BFloat16, DType::Float32,
                                DType::Float64};

// Graphs built with the frontend, each a list of outputs to realize together: every ALU op on
// every dtype that accepts it, every cast, constants, movement, reductions, matmuls, composites

// and gradients.
class Corpus {
 public:
  std::vector<std::vector<UOpRef>> graphs;
  std::vector<std::string> errors;  // graphs the frontend should have accepted

  Corpus() {
    elementwise();
    constants();
    casts();
    bitcasts();
    movement();
    reductions();
    matmuls();
    composites();
    gradients();
  }

 private:
  UOpRef leaf(DType dt, Shape shape) { return *fe::buffer(next_id_++, dt, std::move(shape)); }
  // A graph the frontend must accept.
  void add(const absl::StatusOr<UOpRef>& r) {
    if (r.ok()) graphs.push_back({*r});
    else errors.push_back(std::string(r.status().message()));
  }
  // A graph the frontend may reject for its dtype (FDIV of ints, NEG of bool, ...).
  void try_add(const absl::StatusOr<UOpRef>& r) {
    if (r.ok()) graphs.push_back({*r});
  }
  static absl::StatusOr<UOpRef> alu(Ops op, const std::vector<absl::StatusOr<UOpRef>>& src) {
    std::vector<UOpRef> s;
    for (const auto& x : src) {
      if (!x.ok()) return x.status();
      s.push_back(*x);
    }
    return fe::alu(op, s);
  }

  // Every ALU op on every dtype that accepts it: one kernel per op for float32, int32 and bool,
  // and for the other dtypes every op in two chains (unary, binary) plus WHERE of comparisons.
  void elementwise() {
    const Ops unary[] = {Ops::NEG, Ops::EXP2, Ops::LOG2, Ops::SQRT, Ops::RECIP, Ops::SIN, Ops::NOT};
    const Ops binary[] = {Ops::ADD, Ops::SUB,   Ops::MUL,   Ops::FDIV, Ops::IDIV, Ops::MOD,
                          Ops::MAX, Ops::CMPLT, Ops::CMPNE, Ops::AND,  Ops::OR,   Ops::XOR};
    for (DType dt : kAllDTypes) {
      UOpRef a = leaf(dt, {5, 7}), b = leaf(dt, {5, 7});
      if (dt == DType::Float32 || dt == DType::Int32 || dt == DType::Bool) {
        for (Ops op : unary) try_add(fe::alu(op, {a}));
        for (Ops op : binary) try_add(fe::alu(op, {a, b}));
      }
      absl::StatusOr<UOpRef> u = a;
      for (Ops op : unary)
        if (auto y = alu(op, {u}); y.ok()) u = y;
      add(u);
      absl::StatusOr<UOpRef> x = a;
      for (Ops op : binary)
        if (auto y = alu(op, {x, b}); y.ok() && (*y)->dtype == dt) x = y;
      add(x);
      add(alu(Ops::WHERE, {alu(Ops::CMPLT, {a, b}), alu(Ops::WHERE, {alu(Ops::CMPNE, {b, a}), x, u}), b}));
    }
  }

  // Every constant kind of each dtype in one expression (literals, infinities, NaN, extremes),
  // and integer division by constants (the unguarded path) and by values (the guarded one).
  void constants() {
    const double floats[] = {0.0, -0.0, 1.0, -2.5, 1e-30, 3.4e38, 1e300, std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(), std::nan("")};
    const int64_t ints[] = {0, 1, -1, 127, -128, 255, 65535, 2147483647, std::numeric_limits<int64_t>::min(),
                            std::numeric_limits<int64_t>::max(), -7};
    for (DType dt : kAllDTypes) {
      absl::StatusOr<UOpRef> x = leaf(dt, {6});
      Ops op = dt == DType::Bool ? Ops::OR : Ops::MAX;
      if (dtype_is_float(dt)) {
        for (double v : floats) x = alu(op, {x, fe::constant(v, dt, {6})});
      } else {
        for (int64_t v : ints) x = alu(op, {x, fe::constant(v, dt, {6})});
      }
      add(x);
      if (!dtype_is_int(dt)) continue;
      UOpRef a = leaf(dt, {6});
      auto q = alu(Ops::IDIV, {a, fe::constant(int64_t{3}, dt, {6})});
      auto r = alu(Ops::MOD, {q, fe::constant(int64_t{-3}, dt, {6})});
      add(alu(Ops::ADD, {r, alu(Ops::IDIV, {fe::constant(int64_t{100}, dt, {6}), a})}));
    }
  }

  // Every pair of dtypes: x cast to each other dtype and back, combined, one kernel per source
  // dtype; and single casts to and from the 16-bit floats, whose conversions are helpers.
  void casts() {
    for (DType from : kAllDTypes) {
      UOpRef x = leaf(from, {4, 3});
      absl::StatusOr<UOpRef> acc = x;
      for (DType to : kAllDTypes)
        if (to != from) acc = alu(from == DType::Bool ? Ops::OR : Ops::ADD, {acc, fe::cast(*fe::cast(x, to), from)});
      add(acc);
      for (DType half : {DType::Float16, DType::BFloat16}) {
        if (from == half) continue;
        add(fe::cast(x, half));
        add(fe::cast(leaf(half, {4, 3}), from));
      }
    }
  }

  // Every same-itemsize pair one way and there and back (pairs of integers are CASTs), the
  // 16-bit cases the renderer treats apart (bits read through a view, i.e. a gated load; a value
  // used both as bits and as a number; bits computed on and stored as a 16-bit float), the abs
  // via bits of each float type, a bitcast inside a reduction, and differing itemsizes.
  void bitcasts() {
    for (DType from : kAllDTypes) {
      UOpRef x = leaf(from, {4, 3});
      for (DType to : kAllDTypes) {
        if (to == from || dtype_itemsize(to) != dtype_itemsize(from)) continue;
        add(fe::bitcast(x, to));
        add(fe::bitcast(*fe::bitcast(x, to), from));
      }
    }
    for (DType half : {DType::Float16, DType::BFloat16}) {
      UOpRef h = leaf(half, {4, 3}), i = leaf(DType::Int16, {4, 3});
      add(fe::bitcast(*fe::pad(h, {{1, 1}, {0, 2}}), DType::UInt16));
      add(alu(Ops::ADD, {fe::bitcast(h, DType::Int16), fe::cast(*alu(Ops::MUL, {h, h}), DType::Int16)}));
      auto hi = fe::bitcast(i, half);
      add(alu(Ops::ADD, {hi, hi}));
      add(fe::bitcast(*alu(Ops::AND, {fe::bitcast(h, DType::Int16), fe::constant(int64_t{0x7fff}, DType::Int16, {4, 3})}),
                      half));
      add(fe::bitcast(*fe::flip(h, {0}), half == DType::Float16 ? DType::BFloat16 : DType::Float16));
    }
    for (auto [f, i] : {std::pair{DType::Float32, DType::Int32}, std::pair{DType::Float64, DType::Int64}}) {
      UOpRef x = leaf(f, {4, 3});
      int64_t mask = f == DType::Float32 ? 0x7fffffff : std::numeric_limits<int64_t>::max();
      add(fe::bitcast(*alu(Ops::AND, {fe::bitcast(x, i), fe::constant(mask, i, {4, 3})}), f));
      add(fe::reduce(Ops::ADD, *fe::bitcast(leaf(i, {4, 3}), f), {1}));
    }
    // Differing itemsizes: bytes split out of wider elements and joined into them, on views.
    UOpRef w = leaf(DType::Float32, {4, 6});
    add(fe::bitcast(w, DType::UInt8));
    add(fe::bitcast(*fe::permute(w, {1, 0}), DType::BFloat16));
    add(fe::bitcast(w, DType::Float64));
    add(fe::bitcast(*fe::flip(leaf(DType::UInt8, {3, 8}), {1}), DType::Float32));
    add(fe::bitcast(leaf(DType::Float16, {2, 8}), DType::Int64));
    add(fe::bitcast(leaf(DType::Float64, {5, 2}), DType::Bool));
  }

  void movement() {
    for (DType dt : {DType::Float32, DType::BFloat16, DType::Bool}) {
      UOpRef x = leaf(dt, {4, 5, 6});
      add(fe::pad(x, {{1, 2}, {0, 0}, {3, 1}}));
      add(fe::shrink(x, {{1, 3}, {0, 5}, {2, 6}}));
      add(fe::flip(x, {0, 2}));
      add(fe::permute(x, {2, 0, 1}));
      auto r = fe::reshape(x, {20, 6});
      if (r.ok()) add(fe::expand(*fe::reshape(*r, {1, 20, 6}), {3, 20, 6}));
      // A chain of views fused into one index expression.
      auto chain = fe::permute(*fe::flip(*fe::pad(x, {{0, 1}, {2, 0}, {1, 1}}), {1}), {1, 2, 0});
      if (chain.ok()) add(fe::shrink(*chain, {{1, 6}, {0, 7}, {1, 4}}));
      add(fe::reshape(*fe::permute(x, {1, 0, 2}), {5, 24}));
    }
    UOpRef v = leaf(DType::Float32, {8});
    add(alu(Ops::ADD, {fe::expand(*fe::reshape(v, {8, 1}), {8, 8}), fe::expand(*fe::reshape(v, {1, 8}), {8, 8})}));
  }

  // ADD and MAX over each axis, two axes and all axes for float32, float16 and int32; over one
  // axis and all axes for the other dtypes.
  void reductions() {
    for (DType dt : kAllDTypes) {
      UOpRef x = leaf(dt, {4, 6, 8});
      bool every_axis_set = dt == DType::Float32 || dt == DType::Float16 || dt == DType::Int32;
      for (Ops op : {Ops::ADD, Ops::MAX}) {
        if (every_axis_set) {
          for (int64_t axis = 0; axis < 3; ++axis) add(fe::reduce(op, x, {axis}));
          add(fe::reduce(op, x, {0, 2}));
        } else {
          try_add(fe::reduce(op, x, {op == Ops::ADD ? 1 : 2}));
        }
        try_add(fe::reduce(op, x, {0, 1, 2}));
      }
    }
    // Min as the frontend writes it, max of the negation, for the integer widths a GPU computes
    // in 32-bit registers (the renderer's pg_ineg: cuda_renderer.cpp says why).
    for (DType dt : {DType::Int8, DType::Int16, DType::Int32, DType::UInt32}) {
      add(fe::reduce(Ops::MAX, *fe::alu(Ops::NEG, {leaf(dt, {5, 7})}), {1}));
      add(fe::reduce(Ops::MAX, *fe::alu(Ops::NEG, {leaf(dt, {4, 7})}), {0}));
    }
    // Symbolic dims: reductions whose loops stop at the extent (a 0-d int32 leaf) and mask past it.
    {
      UOpRef n = leaf(DType::Int32, {});
      for (DType dt : {DType::Float32, DType::Int32}) {
        UOpRef x = *fe::bound(leaf(dt, {4, 64}), 1, n);
        add(fe::reduce(Ops::ADD, x, {1}));
        add(fe::reduce(Ops::MAX, x, {1}));
        add(fe::reduce(Ops::ADD, *fe::permute(x, {1, 0}), {0}));
      }
    }
    // Large reductions: split into two kernels by the scheduler.
    for (DType dt : {DType::Float32, DType::Float16, DType::Int32, DType::Float64}) {
      add(fe::reduce(Ops::ADD, leaf(dt, {1 << 16}), {0}));
      add(fe::reduce(Ops::MAX, leaf(dt, {2, 256, 256}), {1, 2}));
      // Few outputs, long rows: a block per output on a GPU.
      add(fe::reduce(Ops::ADD, leaf(dt, {6, 4096}), {1}));
      add(fe::reduce(Ops::MAX, leaf(dt, {6, 4096}), {1}));
    }
    add(fe::sum(leaf(DType::Float32, {300, 700}), {0}, false));
  }

  void matmuls() {
    const std::pair<Shape, Shape> shapes[] = {
        {{1, 1}, {1, 1}},     {{3, 5}, {5, 7}},       {{16, 16}, {16, 16}}, {{8, 32}, {32, 64}},
        {{33, 17}, {17, 9}},  {{64, 64}, {64, 64}},   {{2, 4, 8}, {8, 16}}, {{5}, {5, 3}},
        {{6, 5}, {5}},        {{2, 3, 8}, {2, 8, 4}}, {{128, 256}, {256, 32}}, {{7, 128}, {128, 128}}};
    for (const auto& [a, b] : shapes) add(fe::matmul(leaf(DType::Float32, a), leaf(DType::Float32, b)));
    for (DType dt : {DType::Float16, DType::BFloat16, DType::Float64, DType::Int32, DType::Int8})
      for (size_t i : {1, 4, 6, 9, 10}) add(fe::matmul(leaf(dt, shapes[i].first), leaf(dt, shapes[i].second)));
    // 2^20 outputs: register tiles on a GPU (a 4 x 4 tile per thread, 16 x 16 tiles per block),
    // also batched, transposed, in 16 bits and with a fused epilogue.
    UOpRef a = leaf(DType::Float32, {1024, 48}), b = leaf(DType::Float32, {48, 1024});
    add(fe::matmul(a, b));
    add(fe::matmul(leaf(DType::Float32, {4, 512, 24}), leaf(DType::Float32, {24, 512})));
    add(fe::matmul(a, *fe::permute(leaf(DType::Float32, {1024, 48}), {1, 0})));
    add(fe::matmul(leaf(DType::Float16, {1024, 32}), leaf(DType::Float16, {32, 1024})));
    add(fe::relu(*fe::matmul(a, b)));
    // 257 rows of tiles: numbered along rows, not in 16 x 16 squares.
    add(fe::matmul(leaf(DType::Float32, {1028, 16}), leaf(DType::Float32, {16, 1024})));
  }

  void composites() {
    UOpRef x = leaf(DType::Float32, {6, 10});
    add(fe::softmax(x, 0));
    add(fe::logsumexp(x, 1, false));
    add(fe::var(x, {1}, true, 1.0));
    add(fe::mean(x, {}, false));
    for (auto f : {fe::exp, fe::log, fe::relu, fe::sigmoid, fe::tanh, fe::silu}) add(f(x));
    for (DType dt : {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64}) {
      UOpRef y = leaf(dt, {6, 10});
      add(fe::softmax(y, -1));
      add(fe::log_softmax(y, -1));
      add(fe::layernorm(y, 1, 1e-5));
      add(fe::gelu(y));
    }
    add(fe::layernorm(leaf(DType::Float32, {2, 3, 16, 16}), 2, 1e-6));
    add(fe::softmax(leaf(DType::Float32, {4, 8, 16, 16}), -1));  // attention-shaped scores
  }

  void gradients() {
    for (DType dt : {DType::Float32, DType::Float16}) {
      // A two-layer MLP with a log-softmax loss.
      UOpRef x = leaf(dt, {8, 16}), w1 = leaf(dt, {16, 32}), w2 = leaf(dt, {32, 10});
      auto logits = fe::matmul(*fe::relu(*fe::matmul(x, w1)), w2);
      add_gradients(fe::mean(*fe::log_softmax(*logits, -1), {}, false), {w1, w2, x});
    }
    // Max (elementwise and reduce), movement ops, layernorm and activations backward, and
    // second order: the gradient of a gradient.
    UOpRef y = leaf(DType::Float32, {5, 6});
    auto mx = fe::expand(*fe::max(y, {1}, true), {5, 6});
    auto view = fe::shrink(*fe::flip(*fe::pad(y, {{1, 0}, {0, 2}}), {0}), {{0, 5}, {1, 7}});
    add_gradients(fe::sum(*alu(Ops::MUL, {mx, alu(Ops::MAX, {y, view})}), {}, false), {y});
    auto dln = fe::gradient(*fe::sum(*fe::layernorm(y, 1, 1e-5), {}, false), {y});
    add_gradients(dln.ok() ? fe::sum((*dln)[0], {}, false) : dln.status(), {y});
    add_gradients(fe::sum(*fe::tanh(*fe::sigmoid(*fe::gelu(y))), {}, false), {y});
  }

  void add_gradients(const absl::StatusOr<UOpRef>& loss, const std::vector<UOpRef>& wrt) {
    auto g = loss.ok() ? fe::gradient(*loss, wrt) : loss.status();
    if (g.ok()) graphs.push_back(*g);
    else errors.push_back(std::string(g.status().message()));
  }

  uint64_t next_id_ = 1;
};

}  // namespace polygrad::test_corpus
