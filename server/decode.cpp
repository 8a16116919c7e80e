#include "server/decode.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/frontend/gradient.h"
#include "core/frontend/tensor_ops.h"
#include "core/ir/symbolic_dims.h"
#include "core/engine/placement.h"
#include "server/decode_ops.h"
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

// ---- composite parameters -----------------------------------------------------------------

std::vector<int64_t> vec(const google::protobuf::RepeatedField<int64_t>& f) { return {f.begin(), f.end()}; }

frontend::CompositeArgs composite_args(const v1::CompositeArg& c) {
  frontend::CompositeArgs a;
  a.axes = vec(c.axes());
  a.keepdim = c.keepdim();
  a.eps = c.eps();
  a.correction = c.correction();
  a.no_axes = c.no_axes();
  a.normalized_axes = c.normalized_axes();
  a.kernel = vec(c.kernel());
  a.stride = vec(c.stride());
  a.padding = vec(c.padding());
  a.dilation = vec(c.dilation());
  a.output_padding = vec(c.output_padding());
  a.counted_padding = vec(c.counted_padding());
  a.ceil_mode = c.ceil_mode();
  a.start = c.start();
  a.stop = c.stop();
  a.trust_coefficient = c.trust_coefficient();
  a.classic_momentum = c.classic_momentum();
  a.equation = c.equation();
  a.mean = c.mean();
  a.std = c.std();
  a.groups = c.groups();
  a.n = c.n();
  a.diagonal = c.diagonal();
  a.seed = c.seed();
  a.counter = c.counter();
  a.shape = vec(c.shape());
  a.low = c.low();
  a.high = c.high();
  a.p = c.p();
  a.causal = c.causal();
  a.alpha = c.alpha();
  a.rtol = c.rtol();
  a.atol = c.atol();
  a.equal_nan = c.equal_nan();
  a.device = c.device();
  a.descending = c.descending();
  a.indices = c.indices();
  a.beta = c.beta();
  a.threshold = c.threshold();
  a.neg_slope = c.neg_slope();
  a.min_val = c.min_val();
  a.max_val = c.max_val();
  a.label_smoothing = c.label_smoothing();
  a.momentum = c.momentum();
  a.weight_decay = c.weight_decay();
  a.nesterov = c.nesterov();
  a.beta1 = c.beta1();
  a.beta2 = c.beta2();
  a.decoupled = c.decoupled();
  a.detect_positive = c.detect_positive();
  a.detect_negative = c.detect_negative();
  a.mode = c.mode();
  a.include_self = c.include_self();
  a.align_corners = c.align_corners();
  a.ignore_index = c.ignore_index();
  a.step = c.step();
  a.replacement = c.replacement();
  a.fill = c.fill();
  return a;
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
    if (built.ok() && node_.symbolic_size() > 0) built = mark_symbolic_dims(*built);
    if (!built.ok()) return with_prefix(built.status(), prefix_);
    const UOpRef& u = *built;
    // Movement ops such as PAD can grow a tensor past the limits: check what was built.
    if (absl::Status s = check_shape(u->shape, limits_, absl::StrCat(prefix_, "result shape")); !s.ok()) return s;
    if (node_.dtype() != v1::DTYPE_UNSPECIFIED && spec_.build != v1::OpSchema::BUILD_BUFFER) {
      std::optional<DType> stated = from_wire(node_.dtype());
      if (stated != u->dtype) {
        return absl::InvalidArgumentError(absl::StrCat(prefix_, "stated dtype ", av(wire_dtype_name(node_.dtype())),
                                                       " differs from the derived dtype ", av(dtype_name(u->dtype))));
      }
    }
    return DecodedNode{node_.id(), u, leaf_, std::move(random_keys_), std::move(extents_)};
  }

 private:
  absl::StatusOr<UOpRef> build(uint64_t& inline_bytes) {
    using S = v1::OpSchema;
    switch (spec_.build) {
      case S::BUILD_BUFFER: return build_buffer(inline_bytes);
      case S::BUILD_CONST: return build_const();
      case S::BUILD_ALU: return frontend::alu(spec_.core, src_);
      case S::BUILD_CAST:
      case S::BUILD_BITCAST: {
        absl::StatusOr<DType> dt = required_dtype();
        if (!dt.ok()) return dt.status();
        return spec_.build == S::BUILD_BITCAST ? frontend::bitcast(src_[0], *dt) : frontend::cast(src_[0], *dt);
      }
      case S::BUILD_REDUCE: return frontend::reduce(spec_.core, src_[0], axes());
      case S::BUILD_RESHAPE:
      case S::BUILD_EXPAND: {
        Shape shape(node_.shape().dims().begin(), node_.shape().dims().end());
        if (absl::Status s = check_shape(shape, limits_, "shape"); !s.ok()) return s;
        return spec_.build == S::BUILD_RESHAPE ? frontend::reshape(src_[0], std::move(shape))
                                               : frontend::expand(src_[0], std::move(shape));
      }
      case S::BUILD_PERMUTE: return frontend::permute(src_[0], axes());
      case S::BUILD_FLIP: return frontend::flip(src_[0], axes());
      case S::BUILD_PAD: {
        absl::StatusOr<frontend::Pairs> pairs = this->pairs();
        if (!pairs.ok()) return pairs.status();
        return frontend::pad(src_[0], *pairs);
      }
      case S::BUILD_SHRINK: return build_shrink();
      case S::BUILD_GRADIENT: {
        absl::StatusOr<std::vector<UOpRef>> g = frontend::gradient(src_[0], {src_[1]});
        if (!g.ok()) return g.status();
        return (*g)[0];
      }
      case S::BUILD_COMPOSITE: return build_composite();
      default: break;
    }
    return absl::InternalError("op without a builder");
  }

  // The node's symbolic dims on what `built` made of its concrete arg: each axis marked with its
  // extent, held in a 0-d int32 buffer of its own (as a random key is) so the graph's structure
  // does not depend on the value. A SHRINK's symbolic begins were taken by build_shrink.
  absl::StatusOr<UOpRef> mark_symbolic_dims(UOpRef built) {
    const bool shrink = spec_.build == v1::OpSchema::BUILD_SHRINK;
    if (!shrink && spec_.build != v1::OpSchema::BUILD_RESHAPE && spec_.build != v1::OpSchema::BUILD_EXPAND)
      return absl::InvalidArgumentError("symbolic dims are taken by RESHAPE, EXPAND and SHRINK only");
    std::vector<bool> seen(built->shape.size());
    for (const v1::SymbolicDim& d : node_.symbolic()) {
      if (d.axis() >= built->shape.size())
        return absl::InvalidArgumentError(absl::StrCat("symbolic dim axis ", d.axis(), " is out of range for rank ", built->shape.size()));
      if (seen[d.axis()]) return absl::InvalidArgumentError(absl::StrCat("symbolic dim axis ", d.axis(), " is given twice"));
      seen[d.axis()] = true;
      if (d.begin()) continue;
      if (shrink && node_.pairs().begin(static_cast<int>(d.axis())) != 0)
        return absl::InvalidArgumentError(absl::StrCat("a symbolic end of axis ", d.axis(), " needs begin 0"));
      absl::StatusOr<UOpRef> extent = value_buffer(d);
      if (!extent.ok()) return extent.status();
      absl::StatusOr<UOpRef> marked = frontend::bound(built, d.axis(), *extent);
      if (!marked.ok()) return marked.status();
      built = *std::move(marked);
    }
    return built;
  }

  // A SHRINK; an axis with a symbolic begin is read from its begin's buffer (frontend::slice_at),
  // the pair's end - begin elements.
  absl::StatusOr<UOpRef> build_shrink() {
    absl::StatusOr<frontend::Pairs> pairs = this->pairs();
    if (!pairs.ok()) return pairs.status();
    std::vector<const v1::SymbolicDim*> begins;
    for (const v1::SymbolicDim& d : node_.symbolic()) {
      if (!d.begin()) continue;
      if (d.axis() >= pairs->size())
        return absl::InvalidArgumentError(absl::StrCat("symbolic begin axis ", d.axis(), " is out of range for rank ", pairs->size()));
      begins.push_back(&d);
    }
    frontend::Pairs fixed = *pairs;
    for (const v1::SymbolicDim* d : begins) fixed[d->axis()] = {0, src_[0]->shape[d->axis()]};
    absl::StatusOr<UOpRef> x = frontend::shrink(src_[0], fixed);
    for (const v1::SymbolicDim* d : begins) {
      if (!x.ok()) return x;
      absl::StatusOr<UOpRef> begin = value_buffer(*d);
      if (!begin.ok()) return begin.status();
      auto [b, e] = (*pairs)[d->axis()];
      x = frontend::slice_at(*x, d->axis(), *begin, e - b);
    }
    return x;
  }

  // A symbolic dim's value (an extent or a begin) in a 0-d int32 buffer of its own, bound with the
  // node; with the variable term a compiled step sets it from per run.
  absl::StatusOr<UOpRef> value_buffer(const v1::SymbolicDim& d) {
    if (d.extent() < 0 || d.extent() > std::numeric_limits<int32_t>::max())
      return absl::InvalidArgumentError(absl::StrCat("symbolic dim on axis ", d.axis(), ": value ", d.extent(),
                                                     " is outside [0, 2^31)"));
    std::optional<VariableTerm> term;
    if (!d.variable().empty()) {
      constexpr int64_t kMaxTerm = int64_t{1} << 31;
      if (d.variable().size() > kMaxVariableName || d.mul() < 1 || d.mul() >= kMaxTerm || d.add() <= -kMaxTerm ||
          d.add() >= kMaxTerm)
        return absl::InvalidArgumentError(absl::StrCat("symbolic dim on axis ", d.axis(), ": a variable name of 1 to ",
                                                       kMaxVariableName, " bytes, mul in [1, 2^31) and add in (-2^31, 2^31) ",
                                                       "are required, got ", d.variable().size(), " bytes, ", d.mul(),
                                                       " and ", d.add()));
      term = VariableTerm{d.variable(), d.mul(), d.add()};
    }
    absl::StatusOr<BufferPtr> buf = engine_.allocate(DType::Int32, {}, Buffer::Fill::None);  // filled just below
    if (!buf.ok()) return buf.status();
    const auto value = static_cast<int32_t>(d.extent());
    std::memcpy((*buf)->data(), &value, sizeof value);
    absl::StatusOr<UOpRef> leaf = frontend::buffer((*buf)->id(), DType::Int32, {});
    if (!leaf.ok()) return leaf.status();
    extents_.push_back(DecodedNode::Extent{*leaf, *std::move(buf), std::move(term)});
    return *leaf;
  }

  // Composites are core's: the node's parameters become core's CompositeArgs, and the daemon's
  // limits and devices reach the builder as checks.
  absl::StatusOr<UOpRef> build_composite() {
    for (const UOpRef& s : src_)
      if (!s->extents.empty() && !frontend::composite_takes_symbolic(v1::Op_Name(spec_.wire)))
        return absl::InvalidArgumentError("a source has a symbolic dim, which this op does not take (it would read the "
                                          "dim's size): shrink to a concrete size or reduce the dim first");
    const frontend::CompositeArgs args = composite_args(node_.composite());
    std::optional<DType> dtype;
    if (node_.dtype() != v1::DTYPE_UNSPECIFIED) {
      dtype = from_wire(node_.dtype());
      if (!dtype) return absl::InvalidArgumentError(absl::StrCat("unknown dtype ", static_cast<int>(node_.dtype())));
    }
    frontend::CompositeCall call{src_, args, dtype, {node_.shape().dims().begin(), node_.shape().dims().end()},
                                 limits_.max_elements,
                                 [this](std::span<const int64_t> shape, std::string_view what) {
                                   return check_shape(shape, limits_, what);
                                 },
                                 [this](int64_t code) { return engine_.check_device(code); },
                                 [this](std::span<const int64_t> shape, std::string_view what) {
                                   return check_work(shape, limits_, what);
                                 },
                                 [this](const std::array<uint32_t, 3>& words) { return random_key_buffer(words); }};
    return spec_.composite(call);
  }

  // A random op's key as a buffer of its own, so its kernels compile once for every key.
  absl::StatusOr<UOpRef> random_key_buffer(const std::array<uint32_t, 3>& words) {
    absl::StatusOr<BufferPtr> buf = engine_.allocate(DType::UInt32, {3}, Buffer::Fill::None);  // filled just below
    if (!buf.ok()) return buf.status();
    std::memcpy((*buf)->data(), words.data(), sizeof(words));
    absl::StatusOr<UOpRef> leaf = frontend::buffer((*buf)->id(), DType::UInt32, {3});
    if (!leaf.ok()) return leaf.status();
    random_keys_.push_back(DecodedNode::RandomKey{*leaf, *std::move(buf), words});
    return leaf;
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
  std::vector<DecodedNode::RandomKey> random_keys_;
  std::vector<DecodedNode::Extent> extents_;
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

namespace {

// INVALID_ARGUMENT for a negative dimension; `excess` (RESOURCE_EXHAUSTED) when the element count
// passes `bound`, computed without overflowing.
absl::Status count_within(std::span<const int64_t> shape, uint64_t bound, std::string_view what,
                          std::string_view excess) {
  uint64_t numel = 1;
  bool overflow = false;
  for (int64_t d : shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(absl::StrCat(av(what), " [", absl::StrJoin(shape, ","), "] has a negative dimension"));
    }
    const auto u = static_cast<uint64_t>(d);
    if (u > bound || (u != 0 && numel > bound / u)) overflow = true;
    else numel *= u;
  }
  if (overflow || numel > bound) {
    const std::string dims = absl::StrJoin(shape, ",");
    return absl::ResourceExhaustedError(absl::StrCat(av(what), " [", dims, "] ", std::string(excess), " (", bound, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status check_work(std::span<const int64_t> shape, const Limits& limits, std::string_view what) {
  return count_within(shape, limits.max_work, what, "is more work than max_work");
}

absl::Status check_shape(std::span<const int64_t> shape, const Limits& limits, std::string_view what) {
  if (shape.size() > limits.max_rank) {
    return absl::ResourceExhaustedError(
        absl::StrCat(av(what), " has rank ", shape.size(), ", over max_rank (", limits.max_rank, ")"));
  }
  return count_within(shape, limits.max_elements, what, "has more elements than max_elements");
}

absl::Status check_concrete(uint64_t id, const UOpRef& node) {
  for (size_t a = 0; a < node->extents.size(); ++a)
    if (node->extents[a])
      return absl::InvalidArgumentError(absl::StrCat("output ", id, " has a symbolic dim (axis ", a,
                                                     "): realize a concrete shape (shrink or reduce the dim first)"));
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
      } else if (const absl::Status* failed = resolver.failed_node(s)) {
        return absl::Status(failed->code(), absl::StrCat(prefix, "source ", s, " failed in an earlier request: ",
                                                         failed->message()));
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
