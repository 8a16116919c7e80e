// The bench MLP training step as a core graph: a ReLU MLP (in-hidden-out), one-hot cross-entropy
// loss, SGD update of every parameter. The same computation the Python client sends for
// `-(l2(l1(x).relu()).log_softmax(-1) * y).sum(1).mean(); loss.backward(); opt.step()`, built with
// the frontend directly. Used by the core-only benchmark and the compiled-step tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "core/engine/engine.h"
#include "core/engine/step_program.h"
#include "core/frontend/composites.h"
#include "core/frontend/gradient.h"
#include "core/frontend/tensor_ops.h"

namespace polygrad::bench {

struct MlpStep {
  // Bound leaves: x, y (per-step inputs), then w1, b1, w2, b2 (Linear layout: weight is out x in).
  std::vector<UOpRef> leaves;
  std::vector<BufferPtr> buffers;
  UOpRef loss;
  std::vector<UOpRef> grads;       // d loss / d w1, b1, w2, b2
  std::vector<UOpRef> new_params;  // w1, b1, w2, b2 after one SGD step

  Bindings bindings() const {
    Bindings b;
    for (size_t i = 0; i < leaves.size(); ++i) b[leaves[i].get()] = buffers[i];
    return b;
  }
  // With `materialize_grads`, the gradients get kernels of their own, as when the Python client
  // compiles this step (its optimizer realizes them, see compile_step).
  StepSpec spec(bool materialize_grads = true) const {
    StepSpec s{{loss}, bindings(), {}, {}};
    for (size_t i = 0; i < new_params.size(); ++i) s.assigns.push_back(StepAssign{buffers[2 + i], new_params[i]});
    if (materialize_grads) s.materialize = grads;
    return s;
  }
};

#define POLYGRAD_TRY(var, expr)   \
  auto var##_or = (expr);         \
  if (!var##_or.ok()) return var##_or.status(); \
  UOpRef var = *std::move(var##_or)

inline absl::StatusOr<UOpRef> linear(const UOpRef& x, const UOpRef& w, const UOpRef& b) {
  namespace fe = frontend;
  POLYGRAD_TRY(wt, fe::permute(w, {1, 0}));
  POLYGRAD_TRY(xw, fe::matmul(x, wt));
  POLYGRAD_TRY(bb, fe::broadcast_to(b, xw->shape));
  return fe::alu(Ops::ADD, {xw, bb});
}

// Random float32 data in every buffer (weights uniform in +-1/sqrt(fan_in), as Linear does).
inline absl::StatusOr<MlpStep> make_mlp_step(Engine& engine, int64_t batch, int64_t in, int64_t hidden, int64_t out,
                                             float lr, uint32_t seed) {
  namespace fe = frontend;
  std::mt19937 rng(seed);
  MlpStep m;
  const std::vector<Shape> shapes = {{batch, in}, {batch, out}, {hidden, in}, {hidden}, {out, hidden}, {out}};
  for (size_t i = 0; i < shapes.size(); ++i) {
    auto buf = engine.allocate(DType::Float32, shapes[i]);
    if (!buf.ok()) return buf.status();
    float* p = static_cast<float*>((*buf)->data());
    const int64_t fan_in = i >= 4 ? hidden : in;
    const float bound = i < 2 ? 1.0f : 1.0f / std::sqrt(static_cast<float>(fan_in));
    std::uniform_real_distribution<float> d(i == 0 ? 0.0f : -bound, bound);
    for (int64_t k = 0; k < (*buf)->numel(); ++k) p[k] = d(rng);
    if (i == 1) {  // one-hot labels
      std::memset(p, 0, (*buf)->nbytes());
      std::uniform_int_distribution<int64_t> label(0, out - 1);
      for (int64_t r = 0; r < batch; ++r) p[r * out + label(rng)] = 1.0f;
    }
    auto leaf = fe::buffer((*buf)->id(), DType::Float32, shapes[i]);
    if (!leaf.ok()) return leaf.status();
    m.leaves.push_back(*leaf);
    m.buffers.push_back(*buf);
  }
  const UOpRef &x = m.leaves[0], &y = m.leaves[1], &w1 = m.leaves[2], &b1 = m.leaves[3], &w2 = m.leaves[4],
               &b2 = m.leaves[5];
  POLYGRAD_TRY(h, linear(x, w1, b1));
  POLYGRAD_TRY(a, fe::relu(h));
  POLYGRAD_TRY(z, linear(a, w2, b2));
  POLYGRAD_TRY(ls, fe::log_softmax(z, -1));
  POLYGRAD_TRY(prod, fe::alu(Ops::MUL, {ls, y}));
  POLYGRAD_TRY(rows, fe::sum(prod, {1}, false));
  POLYGRAD_TRY(mean, fe::mean(rows, {0}, false));
  POLYGRAD_TRY(loss, fe::alu(Ops::NEG, {mean}));
  m.loss = loss;
  auto grads = fe::gradient(loss, {w1, b1, w2, b2});
  if (!grads.ok()) return grads.status();
  m.grads = *grads;
  for (size_t i = 0; i < grads->size(); ++i) {
    const UOpRef& p = m.leaves[2 + i];
    POLYGRAD_TRY(step, fe::constant(static_cast<double>(lr), DType::Float32, p->shape));
    POLYGRAD_TRY(scaled, fe::alu(Ops::MUL, {(*grads)[i], step}));
    POLYGRAD_TRY(updated, fe::alu(Ops::SUB, {p, scaled}));
    m.new_params.push_back(updated);
  }
  return m;
}

#undef POLYGRAD_TRY

}  // namespace polygrad::bench
