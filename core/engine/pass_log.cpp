#include "core/engine/pass_log.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"

namespace polygrad {
namespace {

// Numbers the nodes of `root`'s graph sources first, one line each: "%3 = <node> (%1, %2)".
std::string graph_text(const UOpRef& root) {
  std::unordered_map<const UOp*, size_t> id;
  std::string out;
  // Iterative: kernel ASTs can be deep.
  std::vector<std::pair<const UOp*, size_t>> stack{{root.get(), 0}};
  while (!stack.empty()) {
    auto& [n, next] = stack.back();
    if (next < n->src.size()) {
      const UOp* s = n->src[next++].get();
      if (!id.count(s)) stack.push_back({s, 0});
      continue;
    }
    const UOp* done = n;
    stack.pop_back();
    if (id.count(done)) continue;
    const size_t me = id.size();
    id.emplace(done, me);
    absl::StrAppend(&out, "  %", me, " = ", done->str());
    for (size_t i = 0; i < done->src.size(); ++i) absl::StrAppend(&out, i ? ", %" : " (%", id.at(done->src[i].get()));
    absl::StrAppend(&out, done->src.empty() ? "\n" : ")\n");
  }
  return out;
}

void write(std::string_view name, size_t kernel, const std::string& text) {
  std::fprintf(stderr, "polygrad pass %.*s (kernel %zu):\n%s\n", static_cast<int>(name.size()), name.data(), kernel,
               text.c_str());
}

}  // namespace

bool PassLog::logging() {
  static const bool on = [] {
    const char* v = std::getenv("POLYGRAD_DEBUG");
    return v != nullptr && std::atoi(v) >= 2;
  }();
  return on;
}

void PassLog::log(std::string_view name, size_t kernel, const UOpRef& before, const UOpRef& after) {
  if (logging() && before.get() != after.get()) write(name, kernel, graph_text(after));
}

void PassLog::log(std::string_view name, size_t kernel, const LinearKernel& linear) {
  if (!logging()) return;
  std::string text;
  for (size_t i = 0; i < linear.ops.size(); ++i) absl::StrAppend(&text, "  ", i, ": ", linear.ops[i]->str(), "\n");
  write(name, kernel, text);
}

void PassLog::log(std::string_view name, size_t kernel, const std::string& text) {
  if (logging()) write(name, kernel, text);
}

}  // namespace polygrad
