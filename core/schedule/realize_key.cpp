#include "core/schedule/realize_key.h"

#include <bit>
#include <cstring>
#include <functional>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>


namespace polygrad {
namespace {

class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}
  template <typename T>
    requires std::is_trivially_copyable_v<T>
  void put(T v) {
    char bytes[sizeof(T)];
    std::memcpy(bytes, &v, sizeof(T));
    out_.append(bytes, sizeof(T));
  }
  void put_ints(const std::vector<int64_t>& v) {
    put<uint64_t>(v.size());
    for (int64_t x : v) put(x);
  }
  // Every alternative gets its own tag, so e.g. an empty shape list and no argument differ.
  void put_arg(const Arg& arg) {
    put<uint8_t>(static_cast<uint8_t>(arg.index()));
    if (const auto* i = std::get_if<int64_t>(&arg)) {
      put(*i);
    } else if (const auto* d = std::get_if<double>(&arg)) {
      put(std::bit_cast<uint64_t>(*d));  // bits: -0.0 and each NaN payload stay distinct
    } else if (const auto* v = std::get_if<std::vector<int64_t>>(&arg)) {
      put_ints(*v);
    } else if (const auto* r = std::get_if<ReduceArg>(&arg)) {
      put<uint8_t>(static_cast<uint8_t>(r->op));
      put_ints(r->axes);
    }
  }

 private:
  std::string& out_;
};

constexpr uint8_t kLeafTag = 'L';
constexpr uint8_t kNodeTag = 'N';
constexpr uint8_t kDeviceTag = 'D';

}  // namespace

RealizeKey realize_key(const std::vector<UOpRef>& outputs, const Bindings& bound, std::string_view device) {
  RealizeKey key;
  Writer w(key.structure);
  if (!device.empty()) {  // a GPU program runs its own kernels: never the CPU's, nor another GPU's
    w.put<uint8_t>(kDeviceTag);
    w.put<uint32_t>(static_cast<uint32_t>(device.size()));
    key.structure.append(device);
  }
  std::unordered_map<const UOp*, uint32_t> index;  // position in the post-order
  std::unordered_map<const Buffer*, uint32_t> first_leaf_of;

  // Post-order (sources in order, first visit wins) is canonical: it depends only on structure.
  auto emit = [&](const UOp* n, const BufferPtr* buffer) {
    w.put<uint8_t>(buffer ? kLeafTag : kNodeTag);
    w.put<uint8_t>(static_cast<uint8_t>(n->dtype));
    w.put_ints(n->shape);
    if (buffer) {
      const auto leaf = static_cast<uint32_t>(key.leaves.size());
      auto [it, fresh] = first_leaf_of.emplace(buffer->get(), leaf);
      w.put<uint32_t>(it->second);  // aliasing: leaves sharing a buffer name the first of them
      key.leaves.push_back(n);
      key.leaf_buffers.push_back(*buffer);
    } else {
      w.put<uint8_t>(static_cast<uint8_t>(n->op));
      w.put_arg(n->arg);
      w.put<uint32_t>(static_cast<uint32_t>(n->src.size()));
      for (const UOpRef& s : n->src) w.put<uint32_t>(index.at(s.get()));
    }
    index.emplace(n, static_cast<uint32_t>(index.size()));
  };

  struct Frame {
    const UOp* node;
    const BufferPtr* buffer;  // the node's binding: a leaf; null: an ordinary node
    size_t next = 0;          // the next source to visit
  };
  std::vector<Frame> stack;
  auto push = [&](const UOp* n) {
    auto b = bound.find(n);
    stack.push_back(Frame{n, b == bound.end() ? nullptr : &b->second});
  };
  for (const UOpRef& out : outputs) {
    if (index.count(out.get())) continue;
    push(out.get());
    while (!stack.empty()) {
      Frame& f = stack.back();
      if (f.buffer == nullptr && f.next < f.node->src.size()) {
        // A node still on the stack is never reached again: the graph is acyclic.
        const UOp* child = f.node->src[f.next++].get();
        if (!index.count(child)) push(child);
        continue;
      }
      emit(f.node, f.buffer);
      stack.pop_back();
    }
  }
  w.put<uint32_t>(static_cast<uint32_t>(outputs.size()));
  for (const UOpRef& out : outputs) w.put<uint32_t>(index.at(out.get()));
  key.digest = std::hash<std::string_view>{}(key.structure);
  return key;
}

}  // namespace polygrad
