#include "server/decode.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/frontend/composites.h"
#include "core/frontend/sorting.h"
#include "core/frontend/indexing.h"
#include "core/frontend/math.h"
#include "core/frontend/gradient.h"
#include "core/frontend/random.h"
#include "core/frontend/tensor_ops.h"
#include "core/engine/placement.h"
#include "server/decode_ops.h"
#include "server/decode_scatter.h"
#include "server/decode_window.h"
#include "server/status.h"

namespace polygrad::server {
namespace {

// ---- dtypes --------------------------------------------------------------------------------

constexpr std::array<std::pair<v1::DType, DType>, 13> kDTypes = {{
    {v1::BOOL, DType::Bool},       {v1::INT8, DType::Int8},       {v1::INT16, DType::Int16},
    {v1::INT32, DType::Int32},     {v1::INT64, DType::Int64},     {v1::UINT8, DType::UInt8},
    {v1::UINT16, DType::UInt16},   {v1::UINT32, DType::UInt32},   {v1::UINT64, DType::UInt64},
    {v1::FLOAT16, DType::Float16}, {v1::BFLOAT16, DType::BFloat16}, {v1::FLOAT32, DType::Float32},
    {v1::FLOAT64, DType::Float64},
}};

std::string_view wire_dtype_name(v1::DType dt) {
  const std::string& name = v1::DType_Name(dt);
  return name.empty() ? std::string_view("unknown dtype") : std::string_view(name);
}

// ---- one node ------------------------------------------------------------------------------

class NodeDecoder {
 public:
  NodeDecoder(const v1::Node& node, const OpSpec& spec, std::vector<UOpRef> src, const NodeResolver& resolver,
              Engine& engine, const Limits& limits)
      : node_(node), spec_(spec), src_(std::move(src)), resolver_(resolver), engine_(engine), limits_(limits),
        prefix_(absl::StrCat("node ", node.id(), " (", v1::Op_Name(node.op()), "): ")) {}

  // Builds the node; the leaf buffer is set for BUFFER nodes.
  absl::StatusOr<DecodedNode> decode(uint64_t& inline_bytes) {
    absl::StatusOr<UOpRef> built = build(inline_bytes);
    if (!built.ok()) return with_prefix(built.status(), prefix_);
    const UOpRef& u = *built;
    // Movement ops such as PAD can grow a tensor past the limits: check what was built.
    if (absl::Status s = check_shape(u->shape, limits_, absl::StrCat(prefix_, "result shape")); !s.ok()) return s;
    if (node_.dtype() != v1::DTYPE_UNSPECIFIED && spec_.kind != OpKind::Buffer) {
      std::optional<DType> stated = from_wire(node_.dtype());
      if (stated != u->dtype) {
        return absl::InvalidArgumentError(absl::StrCat(prefix_, "stated dtype ", av(wire_dtype_name(node_.dtype())),
                                                       " differs from the derived dtype ", av(dtype_name(u->dtype))));
      }
    }
    return DecodedNode{node_.id(), u, leaf_};
  }

 private:
  absl::StatusOr<UOpRef> build(uint64_t& inline_bytes) {
    switch (spec_.kind) {
      case OpKind::Buffer: return build_buffer(inline_bytes);
      case OpKind::Const: return build_const();
      case OpKind::Unary:
      case OpKind::Binary:
      case OpKind::Ternary: return frontend::alu(spec_.core, src_);
      case OpKind::Cast: {
        absl::StatusOr<DType> dt = required_dtype();
        if (!dt.ok()) return dt.status();
        return spec_.core == Ops::BITCAST ? frontend::bitcast(src_[0], *dt) : frontend::cast(src_[0], *dt);
      }
      case OpKind::Reduce: return frontend::reduce(spec_.core, src_[0], axes());
      case OpKind::Reshape:
      case OpKind::Expand: {
        Shape shape(node_.shape().dims().begin(), node_.shape().dims().end());
        if (absl::Status s = check_shape(shape, limits_, "shape"); !s.ok()) return s;
        return spec_.kind == OpKind::Reshape ? frontend::reshape(src_[0], std::move(shape))
                                           : frontend::expand(src_[0], std::move(shape));
      }
      case OpKind::Permute: return frontend::permute(src_[0], axes());
      case OpKind::Flip: return frontend::flip(src_[0], axes());
      case OpKind::Pad:
      case OpKind::Shrink: {
        absl::StatusOr<frontend::Pairs> pairs = this->pairs();
        if (!pairs.ok()) return pairs.status();
        return spec_.kind == OpKind::Pad ? frontend::pad(src_[0], *pairs) : frontend::shrink(src_[0], *pairs);
      }
      case OpKind::Gradient: {
        absl::StatusOr<std::vector<UOpRef>> g = frontend::gradient(src_[0], {src_[1]});
        if (!g.ok()) return g.status();
        return (*g)[0];
      }
      case OpKind::Composite: return build_composite();
    }
    return absl::InternalError("op kind without a builder");
  }

  // Scans and sorts compare every element of the axis with every other: the work of a tensor
  // with the axis' size appended, held to max_elements like any tensor (else one node could keep
  // a worker busy for hours).
  absl::Status check_pairwise(const UOpRef& x, int64_t axis) const {
    const auto rank = static_cast<int64_t>(x->shape.size());
    if (axis < -rank || axis >= rank) return absl::OkStatus();  // the builder says what is wrong
    Shape grid = x->shape;
    grid.push_back(x->shape[axis < 0 ? axis + rank : axis]);
    return check_shape(grid, limits_, "its pairwise comparisons along the axis");
  }

  absl::StatusOr<UOpRef> build_composite() const {
    const v1::CompositeArg& c = node_.composite();
    std::vector<int64_t> axes(c.axes().begin(), c.axes().end());
    auto one_axis = [&]() -> absl::StatusOr<int64_t> {
      if (axes.size() != 1)
        return absl::InvalidArgumentError(absl::StrCat("needs exactly one axis in composite.axes, got ", axes.size()));
      return axes[0];
    };
    const UOpRef x = src_.empty() ? nullptr : src_[0];  // ARANGE and RAND* have no source
    const frontend::RandomKey key{c.seed(), c.counter()};
    switch (spec_.wire) {
      case v1::MATMUL: return frontend::matmul(src_[0], src_[1]);
      case v1::SOFTMAX:
      case v1::LOG_SOFTMAX:
      case v1::LOGSUMEXP: {
        absl::StatusOr<int64_t> axis = one_axis();
        if (!axis.ok()) return axis.status();
        if (spec_.wire == v1::SOFTMAX) return frontend::softmax(x, *axis);
        if (spec_.wire == v1::LOG_SOFTMAX) return frontend::log_softmax(x, *axis);
        return frontend::logsumexp(x, *axis, c.keepdim());
      }
      case v1::MEAN: return frontend::mean(x, axes, c.keepdim());
      case v1::VAR: return frontend::var(x, axes, c.keepdim(), c.correction());
      case v1::LAYERNORM: return frontend::layernorm(x, c.normalized_axes(), c.eps());
      case v1::EXP: return frontend::exp(x);
      case v1::LOG: return frontend::log(x);
      case v1::RELU: return frontend::relu(x);
      case v1::SIGMOID: return frontend::sigmoid(x);
      case v1::TANH: return frontend::tanh(x);
      case v1::GELU: return frontend::gelu(x);
      case v1::SILU: return frontend::silu(x);
      case v1::ARANGE: {
        absl::StatusOr<DType> dt = required_dtype();
        if (!dt.ok()) return dt.status();
        if (node_.shape().dims_size() != 1)
          return absl::InvalidArgumentError("ARANGE takes shape = [n]");
        Shape shape{node_.shape().dims(0)};
        if (absl::Status s = check_shape(shape, limits_, "shape"); !s.ok()) return s;
        return frontend::arange(shape[0], *dt);
      }
      case v1::CONV2D:
      case v1::MAX_POOL2D:
      case v1::AVG_POOL2D:
      case v1::CONV_TRANSPOSE2D: return build_window_op(spec_.wire, c, src_, limits_);
      case v1::CUMSUM: {
        absl::StatusOr<int64_t> axis = one_axis();
        if (!axis.ok()) return axis.status();
        if (absl::Status s = check_pairwise(x, *axis); !s.ok()) return s;
        return frontend::cumsum(x, *axis);
      }
      case v1::ONE_HOT:
        if (c.n() < 1 || static_cast<uint64_t>(c.n()) > limits_.max_elements)
          return absl::InvalidArgumentError(absl::StrCat("ONE_HOT needs 1 <= n <= max_elements, got ", c.n()));
        return frontend::one_hot(x, c.n());
      case v1::ARGMAX:
      case v1::ARGMIN: {
        absl::StatusOr<int64_t> axis = one_axis();
        if (!axis.ok()) return axis.status();
        return spec_.wire == v1::ARGMAX ? frontend::argmax(x, *axis, c.keepdim()) : frontend::argmin(x, *axis, c.keepdim());
      }
      case v1::TRIL: return frontend::tril(x, c.diagonal());
      case v1::TRIU: return frontend::triu(x, c.diagonal());
      case v1::GATHER: {
        absl::StatusOr<int64_t> axis = one_axis();
        if (!axis.ok()) return axis.status();
        return frontend::gather(x, *axis, src_[1]);
      }
      case v1::POW: return frontend::pow(x, src_[1]);
      case v1::RAND:
      case v1::RANDN:
      case v1::RANDINT: {
        absl::StatusOr<DType> dt = required_dtype();
        if (!dt.ok()) return dt.status();
        Shape shape(c.shape().begin(), c.shape().end());
        if (absl::Status s = check_shape(shape, limits_, "composite.shape"); !s.ok()) return s;
        if (spec_.wire == v1::RAND) return frontend::rand(shape, *dt, key);
        if (spec_.wire == v1::RANDN) return frontend::randn(shape, *dt, key);
        return frontend::randint(shape, *dt, c.low(), c.high(), key);
      }
      case v1::DROPOUT: return frontend::dropout(x, c.p(), key);
      case v1::RMS_NORM: return frontend::rms_norm(x, c.normalized_axes(), c.eps());
      case v1::GROUP_NORM: return frontend::group_norm(x, c.groups(), c.eps());
      case v1::BATCHNORM_TRAIN: return frontend::batchnorm_train(x, c.eps());
      case v1::BATCHNORM_EVAL: return frontend::batchnorm_eval(x, src_[1], src_[2], c.eps());
      case v1::SCALED_DOT_PRODUCT_ATTENTION:
        return frontend::scaled_dot_product_attention(x, src_[1], src_[2], nullptr, c.causal());
      case v1::SCALED_DOT_PRODUCT_ATTENTION_MASKED:
        return frontend::scaled_dot_product_attention(x, src_[1], src_[2], src_[3], c.causal());
      case v1::COPY: {
        // The name is parsed to a code here and never used as text again.
        absl::StatusOr<int64_t> code = device_code(c.device());
        if (!code.ok()) return absl::InvalidArgumentError(absl::StrCat("COPY: ", code.status().message()));
        if (absl::Status s = engine_.check_device(*code); !s.ok()) return s;
        return frontend::copy(x, *code);
      }
      case v1::ERF: return frontend::erf(x);
      case v1::ATAN: return frontend::atan(x);
      case v1::ASIN: return frontend::asin(x);
      case v1::ACOS: return frontend::acos(x);
      case v1::SINH: return frontend::sinh(x);
      case v1::COSH: return frontend::cosh(x);
      case v1::ASINH: return frontend::asinh(x);
      case v1::ACOSH: return frontend::acosh(x);
      case v1::ATANH: return frontend::atanh(x);
      case v1::LOG10: return frontend::log10(x);
      case v1::LOG1P: return frontend::log1p(x);
      case v1::EXPM1: return frontend::expm1(x);
      case v1::LOGADDEXP: return frontend::logaddexp(x, src_[1]);
      case v1::COPYSIGN: return frontend::copysign(x, src_[1]);
      case v1::LERP: return frontend::lerp(x, src_[1], src_[2]);
      case v1::SOFTSIGN: return frontend::softsign(x);
      case v1::CELU: return frontend::celu(x, c.alpha());
      case v1::SELU: return frontend::selu(x);
      case v1::ISFINITE: return frontend::isfinite(x);
      case v1::ISCLOSE: return frontend::isclose(x, src_[1], c.rtol(), c.atol(), c.equal_nan());
      case v1::SOFTPLUS: return frontend::softplus(x, c.beta(), c.threshold());
      case v1::CLAMP_MIN: return frontend::clamp_min(x, src_[1]);
      case v1::CLAMP_MAX: return frontend::clamp_max(x, src_[1]);
      case v1::SORT:
      case v1::TOPK:
      case v1::CUMMAX:
      case v1::CUMMIN:
      case v1::CUMPROD:
      case v1::LOGCUMSUMEXP: {
        absl::StatusOr<int64_t> axis = one_axis();
        if (!axis.ok()) return axis.status();
        if (absl::Status s = check_pairwise(x, *axis); !s.ok()) return s;
        switch (spec_.wire) {
          case v1::SORT: return frontend::sort(x, *axis, c.descending(), c.indices());
          case v1::TOPK: return frontend::topk(x, *axis, c.n(), c.descending(), c.indices());
          case v1::CUMMAX: return frontend::cummax(x, *axis, c.indices());
          case v1::CUMMIN: return frontend::cummin(x, *axis, c.indices());
          case v1::CUMPROD: return frontend::cumprod(x, *axis);
          default: return frontend::logcumsumexp(x, *axis);
        }
      }
      default:
        if (is_scatter_op(spec_.wire)) return build_scatter_op(spec_.wire, c, src_, limits_);
        return absl::InternalError("composite op without a builder");
    }
  }

  absl::StatusOr<DType> required_dtype() const {
    if (node_.dtype() == v1::DTYPE_UNSPECIFIED) return absl::InvalidArgumentError("dtype is required");
    std::optional<DType> dt = from_wire(node_.dtype());
    if (!dt) return absl::InvalidArgumentError(absl::StrCat("unknown dtype ", static_cast<int>(node_.dtype())));
    return *dt;
  }

  std::vector<int64_t> axes() const {
    const auto& a = node_.axes().axes();
    return std::vector<int64_t>(a.begin(), a.end());
  }

  absl::StatusOr<frontend::Pairs> pairs() const {
    const v1::Pairs& p = node_.pairs();
    if (p.begin_size() != p.end_size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("pairs have ", p.begin_size(), " begin values but ", p.end_size(), " end values"));
    }
    if (static_cast<uint64_t>(p.begin_size()) > limits_.max_rank) {
      return absl::ResourceExhaustedError(
          absl::StrCat("pairs for ", p.begin_size(), " axes exceed max_rank (", limits_.max_rank, ")"));
    }
    frontend::Pairs out;
    const auto bound = static_cast<int64_t>(limits_.max_elements);
    for (int i = 0; i < p.begin_size(); ++i) {
      for (int64_t v : {p.begin(i), p.end(i)}) {
        if (v > bound) {
          return absl::ResourceExhaustedError(
              absl::StrCat("pair value ", v, " exceeds max_elements (", limits_.max_elements, ")"));
        }
      }
      out.emplace_back(p.begin(i), p.end(i));
    }
    return out;
  }

  absl::StatusOr<UOpRef> build_const() const {
    absl::StatusOr<DType> dt = required_dtype();
    if (!dt.ok()) return dt.status();
    const v1::Constant& c = node_.constant();
    Shape shape(c.shape().begin(), c.shape().end());
    if (absl::Status s = check_shape(shape, limits_, "shape"); !s.ok()) return s;
    std::variant<int64_t, double> value;
    switch (c.value_case()) {
      case v1::Constant::kFloatValue: value = c.float_value(); break;
      case v1::Constant::kIntValue: value = c.int_value(); break;
      case v1::Constant::kBoolValue: value = int64_t{c.bool_value() ? 1 : 0}; break;
      case v1::Constant::kUintValue: value = static_cast<int64_t>(c.uint_value()); break;  // bit pattern
      case v1::Constant::VALUE_NOT_SET: return absl::InvalidArgumentError("constant has no value");
    }
    return frontend::constant(value, *dt, std::move(shape));
  }

  absl::StatusOr<UOpRef> build_buffer(uint64_t& inline_bytes) {
    const v1::BufferSource& b = node_.buffer();
    Shape shape(b.shape().begin(), b.shape().end());
    switch (b.source_case()) {
      case v1::BufferSource::kHandle: {
        absl::StatusOr<BufferPtr> buf = resolver_.find_handle(b.handle());
        if (!buf.ok()) return buf.status();
        if (node_.dtype() != v1::DTYPE_UNSPECIFIED && from_wire(node_.dtype()) != (*buf)->dtype()) {
          return absl::InvalidArgumentError(absl::StrCat("stated dtype ", av(wire_dtype_name(node_.dtype())),
                                                         " differs from handle ", b.handle(), "'s dtype ",
                                                         av(dtype_name((*buf)->dtype()))));
        }
        if (!shape.empty() && shape != (*buf)->shape()) {
          return absl::InvalidArgumentError(absl::StrCat("stated shape [", absl::StrJoin(shape, ","),
                                                         "] differs from handle ", b.handle(), "'s shape [",
                                                         absl::StrJoin((*buf)->shape(), ","), "]"));
        }
        leaf_ = *buf;
        break;
      }
      case v1::BufferSource::kData: {
        absl::StatusOr<DType> dt = required_dtype();
        if (!dt.ok()) return dt.status();
        if (absl::Status s = check_shape(shape, limits_, "shape"); !s.ok()) return s;
        const std::string& data = b.data();
        if (data.size() > limits_.max_inline_bytes) {
          return absl::ResourceExhaustedError(absl::StrCat("inline data of ", data.size(), " bytes exceeds max_inline_bytes (",
                                                           limits_.max_inline_bytes, "); use Upload"));
        }
        uint64_t numel = 1;
        for (int64_t d : shape) numel *= static_cast<uint64_t>(d);  // bounded by check_shape
        const uint64_t want = numel * dtype_itemsize(*dt);
        if (data.size() != want) {
          return absl::InvalidArgumentError(absl::StrCat("inline data has ", data.size(), " bytes; shape [",
                                                         absl::StrJoin(shape, ","), "] of ", av(dtype_name(*dt)),
                                                         " needs ", want));
        }
        absl::StatusOr<BufferPtr> buf = engine_.allocate(*dt, shape, Buffer::Fill::None);  // filled just below
        if (!buf.ok()) return buf.status();
        if (!data.empty()) std::memcpy((*buf)->data(), data.data(), data.size());
        if (*dt == DType::Bool) {  // only 0 and 1 are valid bools in generated code
          auto* p = static_cast<unsigned char*>((*buf)->data());
          for (size_t i = 0; i < data.size(); ++i) p[i] = p[i] != 0;
        }
        inline_bytes += data.size();
        leaf_ = *std::move(buf);
        break;
      }
      case v1::BufferSource::SOURCE_NOT_SET: return absl::InvalidArgumentError("buffer has neither handle nor data");
    }
    return frontend::buffer(leaf_->id(), leaf_->dtype(), leaf_->shape());
  }

  const v1::Node& node_;
  const OpSpec& spec_;
  std::vector<UOpRef> src_;
  const NodeResolver& resolver_;
  Engine& engine_;
  const Limits& limits_;
  std::string prefix_;
  BufferPtr leaf_;
};

}  // namespace

std::optional<DType> from_wire(v1::DType dtype) {
  for (const auto& [wire, core] : kDTypes) {
    if (wire == dtype) return core;
  }
  return std::nullopt;
}

v1::DType to_wire(DType dtype) {
  for (const auto& [wire, core] : kDTypes) {
    if (core == dtype) return wire;
  }
  return v1::DTYPE_UNSPECIFIED;
}

absl::Status check_shape(std::span<const int64_t> shape, const Limits& limits, std::string_view what) {
  if (shape.size() > limits.max_rank) {
    return absl::ResourceExhaustedError(
        absl::StrCat(av(what), " has rank ", shape.size(), ", over max_rank (", limits.max_rank, ")"));
  }
  uint64_t numel = 1;
  bool overflow = false;
  for (int64_t d : shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(absl::StrCat(av(what), " [", absl::StrJoin(shape, ","), "] has a negative dimension"));
    }
    const auto u = static_cast<uint64_t>(d);
    if (u > limits.max_elements) overflow = true;
    else if (u != 0 && numel > limits.max_elements / u) overflow = true;
    else numel *= u;
  }
  if (overflow || numel > limits.max_elements) {
    return absl::ResourceExhaustedError(absl::StrCat(av(what), " [", absl::StrJoin(shape, ","),
                                                     "] has more elements than max_elements (", limits.max_elements, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<DecodedNodes> decode_nodes(const google::protobuf::RepeatedPtrField<v1::Node>& nodes,
                                          const NodeResolver& resolver, Engine& engine, const Limits& limits) {
  if (static_cast<uint64_t>(nodes.size()) > limits.max_nodes_per_request) {
    return absl::ResourceExhaustedError(absl::StrCat("request has ", nodes.size(), " nodes, over max_nodes_per_request (",
                                                     limits.max_nodes_per_request, ")"));
  }
  DecodedNodes out;
  out.nodes.reserve(nodes.size());
  absl::flat_hash_map<uint64_t, size_t> local;  // id -> index in out.nodes
  local.reserve(nodes.size());
  for (const v1::Node& node : nodes) {
    const OpSpec* spec = find_op(node.op());
    if (spec == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("node ", node.id(), ": unknown op ", static_cast<int>(node.op())));
    }
    const std::string prefix = absl::StrCat("node ", node.id(), " (", v1::Op_Name(node.op()), "): ");
    if (local.contains(node.id())) {
      return absl::InvalidArgumentError(absl::StrCat(prefix, "id ", node.id(), " is defined twice in this request"));
    }
    if (resolver.find_node(node.id()) != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(prefix, "id ", node.id(), " is already defined in this session"));
    }
    if (node.src_size() < spec->arity || node.src_size() > std::max(spec->arity, spec->max_arity)) {
      const std::string takes = spec->max_arity > spec->arity ? absl::StrCat(spec->arity, " to ", spec->max_arity)
                                                              : absl::StrCat(spec->arity);
      return absl::InvalidArgumentError(absl::StrCat(prefix, "takes ", takes, " source(s), got ", node.src_size()));
    }
    if (node.arg_case() != spec->arg) {
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, "expects arg ", av(arg_name(spec->arg)), ", got ", av(arg_name(node.arg_case()))));
    }
    std::vector<UOpRef> src;
    src.reserve(node.src_size());
    for (uint64_t s : node.src()) {
      if (auto it = local.find(s); it != local.end()) {
        src.push_back(out.nodes[it->second].uop);
      } else if (const UOpRef* known = resolver.find_node(s)) {
        src.push_back(*known);
      } else {
        return absl::InvalidArgumentError(absl::StrCat(prefix, "source ", s, " is not defined in this session"));
      }
    }
    absl::StatusOr<DecodedNode> decoded =
        NodeDecoder(node, *spec, std::move(src), resolver, engine, limits).decode(out.inline_bytes);
    if (!decoded.ok()) return decoded.status();
    local.emplace(node.id(), out.nodes.size());
    out.nodes.push_back(*std::move(decoded));
  }
  return out;
}

}  // namespace polygrad::server
