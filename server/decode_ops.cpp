#include "server/decode_ops.h"

namespace polygrad::server {
namespace {

constexpr v1::Node::ArgCase kNoArg = v1::Node::ARG_NOT_SET;

constexpr OpSpec kOpTable[] = {
    {v1::BUFFER, OpKind::Buffer, Ops::BUFFER, 0, v1::Node::kBuffer},
    {v1::CONST, OpKind::Const, Ops::CONST, 0, v1::Node::kConstant},
    {v1::NEG, OpKind::Unary, Ops::NEG, 1, kNoArg},
    {v1::EXP2, OpKind::Unary, Ops::EXP2, 1, kNoArg},
    {v1::LOG2, OpKind::Unary, Ops::LOG2, 1, kNoArg},
    {v1::SQRT, OpKind::Unary, Ops::SQRT, 1, kNoArg},
    {v1::RECIPROCAL, OpKind::Unary, Ops::RECIP, 1, kNoArg},
    {v1::SIN, OpKind::Unary, Ops::SIN, 1, kNoArg},
    {v1::CAST, OpKind::Cast, Ops::CAST, 1, kNoArg},
    {v1::BITCAST, OpKind::Cast, Ops::BITCAST, 1, kNoArg},
    {v1::ADD, OpKind::Binary, Ops::ADD, 2, kNoArg},
    {v1::SUB, OpKind::Binary, Ops::SUB, 2, kNoArg},
    {v1::MUL, OpKind::Binary, Ops::MUL, 2, kNoArg},
    {v1::DIV, OpKind::Binary, Ops::FDIV, 2, kNoArg},
    {v1::MAX, OpKind::Binary, Ops::MAX, 2, kNoArg},
    {v1::CMPLT, OpKind::Binary, Ops::CMPLT, 2, kNoArg},
    {v1::CMPNE, OpKind::Binary, Ops::CMPNE, 2, kNoArg},
    {v1::WHERE, OpKind::Ternary, Ops::WHERE, 3, kNoArg},
    {v1::IDIV, OpKind::Binary, Ops::IDIV, 2, kNoArg},
    {v1::MOD, OpKind::Binary, Ops::MOD, 2, kNoArg},
    {v1::AND, OpKind::Binary, Ops::AND, 2, kNoArg},
    {v1::OR, OpKind::Binary, Ops::OR, 2, kNoArg},
    {v1::XOR, OpKind::Binary, Ops::XOR, 2, kNoArg},
    {v1::REDUCE_SUM, OpKind::Reduce, Ops::ADD, 1, v1::Node::kAxes},
    {v1::REDUCE_MAX, OpKind::Reduce, Ops::MAX, 1, v1::Node::kAxes},
    {v1::REDUCE_PROD, OpKind::Reduce, Ops::MUL, 1, v1::Node::kAxes},
    {v1::RESHAPE, OpKind::Reshape, Ops::RESHAPE, 1, v1::Node::kShape},
    {v1::PERMUTE, OpKind::Permute, Ops::PERMUTE, 1, v1::Node::kAxes},
    {v1::EXPAND, OpKind::Expand, Ops::EXPAND, 1, v1::Node::kShape},
    {v1::PAD, OpKind::Pad, Ops::PAD, 1, v1::Node::kPairs},
    {v1::SHRINK, OpKind::Shrink, Ops::SHRINK, 1, v1::Node::kPairs},
    {v1::FLIP, OpKind::Flip, Ops::FLIP, 1, v1::Node::kAxes},
    {v1::GRADIENT, OpKind::Gradient, Ops::SINK, 2, kNoArg},
    // Composites: `core` is unused; the builder dispatches on the wire op.
    {v1::MATMUL, OpKind::Composite, Ops::SINK, 2, kNoArg},
    {v1::SOFTMAX, OpKind::Composite, Ops::SINK, 1, v1::Node::kComposite},
    {v1::LOG_SOFTMAX, OpKind::Composite, Ops::SINK, 1, v1::Node::kComposite},
    {v1::LOGSUMEXP, OpKind::Composite, Ops::SINK, 1, v1::Node::kComposite},
    {v1::MEAN, OpKind::Composite, Ops::SINK, 1, v1::Node::kComposite},
    {v1::VAR, OpKind::Composite, Ops::SINK, 1, v1::Node::kComposite},
    {v1::LAYERNORM, OpKind::Composite, Ops::SINK, 1, v1::Node::kComposite},
    {v1::EXP, OpKind::Composite, Ops::SINK, 1, kNoArg},
    {v1::LOG, OpKind::Composite, Ops::SINK, 1, kNoArg},
    {v1::RELU, OpKind::Composite, Ops::SINK, 1, kNoArg},
    {v1::SIGMOID, OpKind::Composite, Ops::SINK, 1, kNoArg},
    {v1::TANH, OpKind::Composite, Ops::SINK, 1, kNoArg},
    {v1::GELU, OpKind::Composite, Ops::SINK, 1, kNoArg},
    {v1::SILU, OpKind::Composite, Ops::SINK, 1, kNoArg},
    {v1::ARANGE, OpKind::Composite, Ops::SINK, 0, v1::Node::kShape},
    {v1::CONV2D, OpKind::Composite, Ops::SINK, 2, v1::Node::kComposite},
    {v1::MAX_POOL2D, OpKind::Composite, Ops::SINK, 1, v1::Node::kComposite},
    {v1::AVG_POOL2D, OpKind::Composite, Ops::SINK, 1, v1::Node::kComposite},
    {v1::CUMSUM, OpKind::Composite, Ops::SINK, 1, v1::Node::kComposite},
    {v1::ONE_HOT, OpKind::Composite, Ops::SINK, 1, v1::Node::kComposite},
    {v1::ARGMAX, OpKind::Composite, Ops::SINK, 1, v1::Node::kComposite},
    {v1::ARGMIN, OpKind::Composite, Ops::SINK, 1, v1::Node::kComposite},
    {v1::TRIL, OpKind::Composite, Ops::SINK, 1, v1::Node::kComposite},
    {v1::TRIU, OpKind::Composite, Ops::SINK, 1, v1::Node::kComposite},
    {v1::GATHER, OpKind::Composite, Ops::SINK, 2, v1::Node::kComposite},
    {v1::POW, OpKind::Composite, Ops::SINK, 2, kNoArg},
    {v1::RAND, OpKind::Composite, Ops::SINK, 0, v1::Node::kComposite},
    {v1::RANDN, OpKind::Composite, Ops::SINK, 0, v1::Node::kComposite},
    {v1::RANDINT, OpKind::Composite, Ops::SINK, 0, v1::Node::kComposite},
    {v1::DROPOUT, OpKind::Composite, Ops::SINK, 1, v1::Node::kComposite},
    {v1::CONV_TRANSPOSE2D, OpKind::Composite, Ops::SINK, 2, v1::Node::kComposite},
    {v1::RMS_NORM, OpKind::Composite, Ops::SINK, 1, v1::Node::kComposite},
    {v1::GROUP_NORM, OpKind::Composite, Ops::SINK, 1, v1::Node::kComposite},
    {v1::BATCHNORM_TRAIN, OpKind::Composite, Ops::SINK, 1, v1::Node::kComposite},
    {v1::BATCHNORM_EVAL, OpKind::Composite, Ops::SINK, 3, v1::Node::kComposite},
    {v1::SCALED_DOT_PRODUCT_ATTENTION, OpKind::Composite, Ops::SINK, 3, v1::Node::kComposite},
    {v1::SCALED_DOT_PRODUCT_ATTENTION_MASKED, OpKind::Composite, Ops::SINK, 4, v1::Node::kComposite},
    {v1::COPY, OpKind::Composite, Ops::COPY, 1, v1::Node::kComposite},
    {v1::ERF, OpKind::Composite, Ops::SINK, 1, kNoArg},
    {v1::ATAN, OpKind::Composite, Ops::SINK, 1, kNoArg},
    {v1::ASIN, OpKind::Composite, Ops::SINK, 1, kNoArg},
    {v1::ACOS, OpKind::Composite, Ops::SINK, 1, kNoArg},
    {v1::SINH, OpKind::Composite, Ops::SINK, 1, kNoArg},
    {v1::COSH, OpKind::Composite, Ops::SINK, 1, kNoArg},
    {v1::ASINH, OpKind::Composite, Ops::SINK, 1, kNoArg},
    {v1::ACOSH, OpKind::Composite, Ops::SINK, 1, kNoArg},
    {v1::ATANH, OpKind::Composite, Ops::SINK, 1, kNoArg},
    {v1::LOG10, OpKind::Composite, Ops::SINK, 1, kNoArg},
    {v1::LOG1P, OpKind::Composite, Ops::SINK, 1, kNoArg},
    {v1::EXPM1, OpKind::Composite, Ops::SINK, 1, kNoArg},
    {v1::LOGADDEXP, OpKind::Composite, Ops::SINK, 2, kNoArg},
    {v1::COPYSIGN, OpKind::Composite, Ops::SINK, 2, kNoArg},
    {v1::LERP, OpKind::Composite, Ops::SINK, 3, kNoArg},
    {v1::SOFTSIGN, OpKind::Composite, Ops::SINK, 1, kNoArg},
    {v1::CELU, OpKind::Composite, Ops::SINK, 1, v1::Node::kComposite},
    {v1::SELU, OpKind::Composite, Ops::SINK, 1, kNoArg},
    {v1::ISFINITE, OpKind::Composite, Ops::SINK, 1, kNoArg},
    {v1::ISCLOSE, OpKind::Composite, Ops::SINK, 2, v1::Node::kComposite},
    {v1::SORT, OpKind::Composite, Ops::SINK, 1, v1::Node::kComposite},
    {v1::TOPK, OpKind::Composite, Ops::SINK, 1, v1::Node::kComposite},
    {v1::CUMMAX, OpKind::Composite, Ops::SINK, 1, v1::Node::kComposite},
    {v1::CUMMIN, OpKind::Composite, Ops::SINK, 1, v1::Node::kComposite},
    {v1::CUMPROD, OpKind::Composite, Ops::SINK, 1, v1::Node::kComposite},
    {v1::LOGCUMSUMEXP, OpKind::Composite, Ops::SINK, 1, v1::Node::kComposite},
    {v1::SOFTPLUS, OpKind::Composite, Ops::SINK, 1, v1::Node::kComposite},
    {v1::CLAMP_MIN, OpKind::Composite, Ops::SINK, 2, kNoArg},
    {v1::CLAMP_MAX, OpKind::Composite, Ops::SINK, 2, kNoArg},
    {v1::SCATTER_REDUCE, OpKind::Composite, Ops::SINK, 3, v1::Node::kComposite},
    {v1::NLL_LOSS, OpKind::Composite, Ops::SINK, 2, v1::Node::kComposite, 3},  // the weight is optional
    {v1::INTERPOLATE, OpKind::Composite, Ops::SINK, 1, v1::Node::kComposite},
    {v1::UNFOLD, OpKind::Composite, Ops::SINK, 1, v1::Node::kComposite},
    {v1::NONZERO, OpKind::Composite, Ops::SINK, 1, v1::Node::kComposite},
    {v1::MULTINOMIAL, OpKind::Composite, Ops::SINK, 1, v1::Node::kComposite},
};

}  // namespace

const OpSpec* find_op(v1::Op op) {
  for (const OpSpec& spec : kOpTable) {
    if (spec.wire == op) return &spec;
  }
  return nullptr;
}

std::string_view arg_name(v1::Node::ArgCase c) {
  switch (c) {
    case v1::Node::kShape: return "shape";
    case v1::Node::kAxes: return "axes";
    case v1::Node::kPairs: return "pairs";
    case v1::Node::kConstant: return "constant";
    case v1::Node::kBuffer: return "buffer";
    case v1::Node::kComposite: return "composite";
    case v1::Node::ARG_NOT_SET: return "none";
  }
  return "unknown";
}

}  // namespace polygrad::server
