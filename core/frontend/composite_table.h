// The composite ops by wire name: the one place a composite's name meets its builder.
//
// The daemon decodes a node, then asks this table for the builder of the node's op by its name in
// polygrad.proto's Op enum (the op schema); it keeps no per-op code of its own. A new composite is
// an Op value with its schema options plus an entry here and its builder in core/frontend.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/frontend/random.h"
#include "core/ir/uop.h"

namespace polygrad::frontend {

// The parameters a composite node carries (polygrad.proto's CompositeArg, without protobuf);
// each op reads the fields the proto's comments name for it.
struct CompositeArgs {
  std::vector<int64_t> axes;
  bool keepdim = false;
  double eps = 0;
  double correction = 0;
  bool no_axes = false;
  int64_t normalized_axes = 0;
  std::vector<int64_t> kernel, stride, padding, dilation, output_padding, counted_padding;
  int64_t groups = 0;
  int64_t n = 0;
  int64_t diagonal = 0;
  uint64_t seed = 0, counter = 0;
  std::vector<int64_t> shape;
  int64_t low = 0, high = 0;
  double p = 0;
  bool causal = false;
  double alpha = 0, rtol = 0, atol = 0;
  bool equal_nan = false;
  std::string device;
  bool descending = false, indices = false, ceil_mode = false;
  double beta = 0, threshold = 0;
  double neg_slope = 0, min_val = 0, max_val = 0;
  double label_smoothing = 0;
  double momentum = 0, weight_decay = 0, beta1 = 0, beta2 = 0;
  bool nesterov = false, decoupled = false;
  bool detect_positive = false, detect_negative = false;
  std::string mode;
  bool include_self = false, align_corners = false;
  int64_t ignore_index = 0, step = 0;
  bool replacement = false;
  int64_t fill = 0;
  double start = 0, stop = 0;
  double trust_coefficient = 0;
  bool classic_momentum = false;
  std::string equation;
  double mean = 0, std = 0;
};

// Checks a shape that a builder would allocate or compute over against the daemon's limits
// (rank and element count); `what` names it in the error.
using ShapeCheck = std::function<absl::Status(std::span<const int64_t> shape, std::string_view what)>;

// One composite node to build.
struct CompositeCall {
  std::span<const UOpRef> src;
  const CompositeArgs& arg;
  std::optional<DType> dtype;  // the node's stated dtype, if any
  std::vector<int64_t> shape;  // the node's shape arg (ARANGE)
  uint64_t max_elements = 0;   // the daemon's bound on any value that sizes work
  ShapeCheck check_shape;
  std::function<absl::Status(int64_t device_code)> check_device;  // COPY: the device is available
  // A grid computed but never allocated (a window op's output times its window), held to the
  // daemon's work bound rather than its tensor size bound.
  ShapeCheck check_work;
  // Random ops: a uint32 [3] tensor of data holding a key's words (random_key_words), so that
  // kernels read the key rather than compile it in. Unset: the key is compiled in as constants.
  std::function<absl::StatusOr<UOpRef>(const std::array<uint32_t, 3>& words)> random_key_data;
};

// The stream a random composite draws from: its seed and counter, as data when the call can make
// data (random_key_data), else as constants.
absl::StatusOr<RandomKey> random_key(const CompositeCall& call);

using CompositeBuilder = absl::StatusOr<UOpRef> (*)(const CompositeCall&);

// The builder of the composite op named `name` (an Op value's name), or null when there is none.
CompositeBuilder find_composite(std::string_view name);
// Whether the composite `name` accepts sources with a symbolic dim (core/ir/symbolic_dims.h):
// true for the elementwise ones, matmul and those that only reduce over an axis.
bool composite_takes_symbolic(std::string_view name);

// The names that have a builder, for the check that every composite in the schema has one.
std::vector<std::string_view> composite_names();

}  // namespace polygrad::frontend
