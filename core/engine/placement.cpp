#include "core/engine/placement.h"

#include <cctype>
#include <charconv>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/frontend/tensor_ops.h"

namespace polygrad {
namespace {

// Nodes reachable from `outputs`, sources before users, without descending below bound nodes.
std::vector<const UOp*> post_order(const std::vector<UOpRef>& outputs, const Bindings& bound) {
  std::vector<const UOp*> order;
  std::unordered_map<const UOp*, bool> seen;
  std::vector<std::pair<const UOp*, size_t>> stack;
  for (const UOpRef& o : outputs) {
    if (!seen.emplace(o.get(), true).second) continue;
    stack.push_back({o.get(), 0});
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (!bound.count(node) && next < node->src.size()) {
        const UOp* s = node->src[next++].get();
        if (seen.emplace(s, true).second) stack.push_back({s, 0});
        continue;
      }
      order.push_back(node);
      stack.pop_back();
    }
  }
  return order;
}


}  // namespace

std::string describe_node(const UOp& n) {
  return absl::StrCat(op_name(n.op), " ", dtype_name(n.dtype), "[", absl::StrJoin(n.shape, ","), "]");
}

std::string device_name(int64_t code) {
  if (code == kCpuDevice) return "CPU";
  if (code == kAnyDevice) return "any device";
  return absl::StrCat("CUDA:", code - 1);
}

absl::StatusOr<int64_t> device_code(std::string_view name) {
  std::string upper;
  for (char c : name) upper.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  std::string_view base = upper, index;
  if (size_t colon = upper.find(':'); colon != std::string::npos) {
    base = std::string_view(upper).substr(0, colon);
    index = std::string_view(upper).substr(colon + 1);
  }
  int64_t k = 0;
  if (!index.empty()) {
    auto [end, ec] = std::from_chars(index.data(), index.data() + index.size(), k);
    if (ec != std::errc() || end != index.data() + index.size() || k < 0 || k > 1023)
      return absl::InvalidArgumentError("malformed device name (expected CPU, CUDA or CUDA:<n>)");
  } else if (upper.find(':') != std::string::npos) {
    return absl::InvalidArgumentError("malformed device name (expected CPU, CUDA or CUDA:<n>)");
  }
  if (base == "CPU" && k == 0) return kCpuDevice;
  if (base == "CUDA") return k + 1;
  return absl::InvalidArgumentError("unknown device (expected CPU, CUDA or CUDA:<n>)");
}

absl::StatusOr<int64_t> buffer_device_code(const Buffer& b) {
  if (b.on_host()) return kCpuDevice;
  return device_code(b.device());
}

int64_t copy_target(const UOp& copy, const std::unordered_map<const UOp*, int64_t>& placed) {
  if (copy.arg_int() != frontend::kCopyToSourceDevice) return copy.arg_int();
  auto it = placed.find(copy.src[1].get());
  return it == placed.end() ? kAnyDevice : it->second;
}

bool needs_placement(const std::vector<UOpRef>& outputs, const Bindings& bound) {
  for (const UOp* n : post_order(outputs, bound)) {
    if (auto it = bound.find(n); it != bound.end()) {
      if (!it->second->on_host()) return true;
    } else if (n->op == Ops::COPY) {
      return true;
    }
  }
  return false;
}

absl::StatusOr<std::unordered_map<const UOp*, int64_t>> place(const std::vector<UOpRef>& outputs,
                                                               const Bindings& bound) {
  std::unordered_map<const UOp*, int64_t> device;
  for (const UOp* n : post_order(outputs, bound)) {
    int64_t d = kAnyDevice;
    if (auto it = bound.find(n); it != bound.end()) {
      auto code = buffer_device_code(*it->second);
      if (!code.ok()) return code.status();
      d = *code;
    } else if (n->op == Ops::COPY) {
      d = copy_target(*n, device);
    } else {
      for (const UOpRef& s : n->src) {
        int64_t sd = device.at(s.get());
        if (sd == kAnyDevice) continue;
        if (d != kAnyDevice && d != sd)
          return absl::InvalidArgumentError(absl::StrCat("node ", describe_node(*n), " reads tensors on ", device_name(d), " and ",
                                                         device_name(sd),
                                                         ": a kernel runs on one device; copy one input (Tensor.to)"));
        d = sd;
      }
    }
    device[n] = d;
  }
  return device;
}

}  // namespace polygrad
