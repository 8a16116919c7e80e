// Tensor-level graph construction with validation. Every function checks its inputs and returns
// INVALID_ARGUMENT naming the problem (never aborts), so a decoder can turn untrusted client
// nodes into UOps by calling these alone. Results are lazy tensor UOps carrying their shape.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ir/uop.h"

namespace polygrad::frontend {

using Pairs = std::vector<std::pair<int64_t, int64_t>>;

// A buffer's data as a graph leaf. `buffer_id` is the runtime Buffer's id().
absl::StatusOr<UOpRef> buffer(uint64_t buffer_id, DType dtype, Shape shape);
// A constant broadcast to `shape`. `value` is interpreted as for UOp CONST args.
absl::StatusOr<UOpRef> constant(std::variant<int64_t, double> value, DType dtype, Shape shape);

// 0, 1, ..., n-1 as a 1-D tensor of `dtype` (computed from the loop index, never stored).
absl::StatusOr<UOpRef> arange(int64_t n, DType dtype);

// Elementwise ops: sources share one shape; binary sources share one dtype (except WHERE's
// BOOL condition). CMPLT/CMPNE yield BOOL. FDIV, EXP2, LOG2, SQRT, RECIP, SIN need floats.
absl::StatusOr<UOpRef> alu(Ops op, const std::vector<UOpRef>& src);
absl::StatusOr<UOpRef> cast(const UOpRef& x, DType dtype);
// Each element's bits read as `dtype` (torch's Tensor.view(dtype), tinygrad's bitcast), exact on
// every bit pattern, NaN payloads included; but a float16/bfloat16 NaN that an op computed
// (arithmetic, WHERE, MAX: 16-bit floats compute in float) arrives as some NaN, its payload
// not kept, where torch's WHERE would keep it. Same itemsize: the shape is kept; to the same dtype it
// is `x` itself. Between integers (bool, int8, uint8 among the 1-byte ones) it is the CAST, which
// wraps; since a bool holds only 0 or 1, an int8/uint8 read as bool is `x != 0` (a nonzero byte
// reads as true in torch too, but a round trip gives 1 where torch keeps the byte). Differing
// itemsizes regroup the bytes of the last axis as torch does (little-endian): its size is
// multiplied by from/to, or divided by to/from, which it must be a multiple of; any layout is
// fine (torch needs a contiguous last axis). Not differentiable: no gradient passes it, as
// through a comparison. INVALID_ARGUMENT naming both dtypes and itemsizes for a 0-d tensor with
// differing itemsizes or a last axis that does not divide.
absl::StatusOr<UOpRef> bitcast(const UOpRef& x, DType dtype);
// The unsigned integer dtype of `bytes` bytes (1, 2, 4 or 8): a value's bits, for bitcasts.
DType uint_of_size(size_t bytes);

// Reduction with ADD, MAX or MUL (product) over `axes` (any order, negative counts from the end); reduced
// axes keep size 1.
absl::StatusOr<UOpRef> reduce(Ops op, const UOpRef& x, std::vector<int64_t> axes);

// Symbolic dims (core/ir/symbolic_dims.h). `bound`: x with `axis` marked as valid below `extent`
// (a 0-d int32 tensor). `past_extent`: x with the part of its symbolic `axis` at or past the
// extent replaced by `fill` (what reduce does over a symbolic axis before it reduces).
absl::StatusOr<UOpRef> bound(const UOpRef& x, int64_t axis, const UOpRef& extent);
absl::StatusOr<UOpRef> past_extent(const UOpRef& x, int64_t axis, std::variant<int64_t, double> fill);

absl::StatusOr<UOpRef> reshape(const UOpRef& x, Shape shape);
absl::StatusOr<UOpRef> permute(const UOpRef& x, std::vector<int64_t> order);
absl::StatusOr<UOpRef> expand(const UOpRef& x, Shape shape);
absl::StatusOr<UOpRef> pad(const UOpRef& x, const Pairs& before_after);
absl::StatusOr<UOpRef> shrink(const UOpRef& x, const Pairs& begin_end);
absl::StatusOr<UOpRef> flip(const UOpRef& x, std::vector<int64_t> axes);
// out[..., j] = x[..., index[..., j]]: x (..., n), an integer index (..., m) with x's leading axes;
// an index outside [0, n) gives 0. A load at the selected position, so a lookup in a table of n
// rows reads one row, not n (frontend::gather is this along any axis).
absl::StatusOr<UOpRef> gather_last(const UOpRef& x, const UOpRef& index);
// x's `count` elements along `axis` from `begin`, a 0-d int32 tensor known at run time (a shrink
// whose begin is a Variable's value: one kernel for every value). Positions outside the axis read 0.
// A GATHER along the axis (permuted last and back), which frontend::write_view writes through.
absl::StatusOr<UOpRef> slice_at(const UOpRef& x, int64_t axis, const UOpRef& begin, int64_t count);

// `x`'s value on the device `device_code` (core/engine/placement.h: 0 is the CPU, k + 1 is
// CUDA:k): a transfer the engine runs between kernels. INVALID_ARGUMENT for a negative code.
absl::StatusOr<UOpRef> copy(const UOpRef& x, int64_t device_code);
// `x`'s value on the device where `like` lives, which placement resolves (COPY with the code
// kCopyToSourceDevice and `like` as a second source that only names the device): how a gradient
// returns through a COPY to its source's device.
inline constexpr int64_t kCopyToSourceDevice = -2;
UOpRef copy_to_device_of(const UOpRef& x, const UOpRef& like);

// The permutation that moves `axis` to the end, the other axes keeping their order.
std::vector<int64_t> axis_last_permutation(size_t rank, int64_t axis);
// The permutation that undoes `p`.
std::vector<int64_t> inverse_permutation(const std::vector<int64_t>& p);

}  // namespace polygrad::frontend
