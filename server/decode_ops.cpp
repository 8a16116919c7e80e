#include "server/decode_ops.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace polygrad::server {
namespace {

v1::Node::ArgCase arg_case(v1::OpSchema::Arg arg) {
  switch (arg) {
    case v1::OpSchema::ARG_SHAPE: return v1::Node::kShape;
    case v1::OpSchema::ARG_AXES: return v1::Node::kAxes;
    case v1::OpSchema::ARG_PAIRS: return v1::Node::kPairs;
    case v1::OpSchema::ARG_CONSTANT: return v1::Node::kConstant;
    case v1::OpSchema::ARG_BUFFER: return v1::Node::kBuffer;
    case v1::OpSchema::ARG_COMPOSITE: return v1::Node::kComposite;
    default: return v1::Node::ARG_NOT_SET;
  }
}

std::optional<Ops> core_op(std::string_view name) {
  for (int i = 0; i <= static_cast<int>(Ops::END_RANGE); ++i) {
    if (name == op_name(static_cast<Ops>(i))) return static_cast<Ops>(i);
  }
  return std::nullopt;
}

struct Table {
  absl::flat_hash_map<int, OpSpec> ops;
  std::vector<std::string> problems;  // schema entries the daemon cannot build
};

Table read_schema() {
  Table t;
  const google::protobuf::EnumDescriptor* e = v1::Op_descriptor();
  for (int i = 0; i < e->value_count(); ++i) {
    const google::protobuf::EnumValueDescriptor* v = e->value(i);
    if (v->number() == v1::OP_UNSPECIFIED) continue;
    const v1::OpSchema& s = v->options().GetExtension(v1::op);
    OpSpec spec{static_cast<v1::Op>(v->number()), s.build(), Ops::SINK, s.arity(),
                std::max(s.arity(), s.max_arity()), arg_case(s.arg()), nullptr};
    if (s.build() == v1::OpSchema::BUILD_ALU || s.build() == v1::OpSchema::BUILD_REDUCE) {
      std::optional<Ops> core = core_op(s.core());
      if (!core) t.problems.push_back(absl::StrCat(v->name(), ": unknown core op \"", s.core(), "\""));
      else spec.core = *core;
    }
    if (s.build() == v1::OpSchema::BUILD_COMPOSITE) {
      spec.composite = frontend::find_composite(v->name());
      if (spec.composite == nullptr) t.problems.push_back(absl::StrCat(v->name(), ": no builder in core"));
    }
    t.ops.emplace(v->number(), spec);
  }
  return t;
}

const Table& table() {
  static const Table t = read_schema();
  return t;
}

}  // namespace

const OpSpec* find_op(v1::Op op) {
  auto it = table().ops.find(static_cast<int>(op));
  return it == table().ops.end() ? nullptr : &it->second;
}

absl::Status check_op_table() {
  if (table().problems.empty()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("the op schema has ops this daemon cannot build: ",
                                          absl::StrJoin(table().problems, "; ")));
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
