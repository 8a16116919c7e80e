// A test fixture for realizing core graphs on the CPU engine: random leaves bound to buffers
// (kept alive, since bindings are keyed by address) and results read back as vectors.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/engine/engine.h"
#include "core/frontend/tensor_ops.h"

namespace polygrad::testing {

class RealizeFixture : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { engine_ = std::move(*Engine::create({.threads = 2})).release(); }
  static void TearDownTestSuite() { delete engine_; }

  // A leaf of `dt` whose values come from `gen` (also returned in `v`).
  template <typename T>
  UOpRef leaf(DType dt, Shape shape, std::vector<T>& v, const std::function<T()>& gen) {
    BufferPtr buf = *engine_->allocate(dt, shape);
    v.resize(buf->numel());
    for (T& x : v) x = gen();
    if (!v.empty()) std::memcpy(buf->data(), v.data(), v.size() * sizeof(T));  // data() may be null when empty
    UOpRef x = *frontend::buffer(buf->id(), dt, shape);
    bound_[x.get()] = buf;
    leaves_.push_back(x);
    return x;
  }

  // A float64 leaf, uniform in [lo, hi).
  UOpRef randd(Shape shape, std::vector<double>& v, double lo = -1, double hi = 1) {
    std::uniform_real_distribution<double> d(lo, hi);
    return leaf<double>(DType::Float64, std::move(shape), v, [&] { return d(rng_); });
  }

  // An int32 leaf uniform in [lo, hi].
  UOpRef ints(Shape shape, std::vector<int32_t>& v, int lo, int hi) {
    std::uniform_int_distribution<int> d(lo, hi);
    return leaf<int32_t>(DType::Int32, std::move(shape), v, [&] { return d(rng_); });
  }

  // The message of a call that must fail with INVALID_ARGUMENT.
  template <typename T>
  static std::string message(const absl::StatusOr<T>& r) {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    return std::string(r.status().message());
  }

  // Realizes `y` (which must have shape `want`) and returns its elements.
  template <typename T>
  std::vector<T> run(const absl::StatusOr<UOpRef>& y, Shape want) {
    EXPECT_TRUE(y.ok()) << y.status();
    if (!y.ok()) return {};
    EXPECT_EQ((*y)->shape, want);
    auto r = engine_->realize({*y}, bound_);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return {};
    last_kernels_ = r->stats.kernels;
    const T* d = static_cast<const T*>(r->outputs[0]->data());
    return std::vector<T>(d, d + r->outputs[0]->numel());
  }

  static inline Engine* engine_ = nullptr;
  Bindings bound_;
  std::vector<UOpRef> leaves_;
  uint32_t last_kernels_ = 0;  // kernels the last run() launched
  std::mt19937 rng_{11};
};

}  // namespace polygrad::testing
