// Helpers for the server tests: building wire nodes and talking to an in-process daemon.
#pragma once

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include "polygrad/v1/polygrad.grpc.pb.h"
#include "tests/eventually.h"
#include "tests/processes.h"

// A gRPC status has the given code (grpc::StatusCode::code_); the message shows on failure.
#define EXPECT_CODE(status, code_) \
  EXPECT_EQ((status).error_code(), grpc::StatusCode::code_) << (status).error_message()

namespace polygrad::server::testing {

namespace v1 = ::polygrad::v1;
using ::polygrad::testing::eventually;
using ::polygrad::testing::kWaitLimit;
using ::polygrad::testing::running;

template <typename T>
std::string bytes_of(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

template <typename T>
std::vector<T> values_of(const std::string& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

inline v1::Node inline_buffer(uint64_t id, v1::DType dtype, std::vector<int64_t> shape, std::string data) {
  v1::Node n;
  n.set_id(id);
  n.set_op(v1::BUFFER);
  n.set_dtype(dtype);
  for (int64_t d : shape) n.mutable_buffer()->add_shape(d);
  n.mutable_buffer()->set_data(std::move(data));
  return n;
}

inline v1::Node handle_buffer(uint64_t id, uint64_t handle, v1::DType dtype = v1::DTYPE_UNSPECIFIED) {
  v1::Node n;
  n.set_id(id);
  n.set_op(v1::BUFFER);
  n.set_dtype(dtype);
  n.mutable_buffer()->set_handle(handle);
  return n;
}

inline v1::Node float_const(uint64_t id, double value, std::vector<int64_t> shape, v1::DType dtype = v1::FLOAT32) {
  v1::Node n;
  n.set_id(id);
  n.set_op(v1::CONST);
  n.set_dtype(dtype);
  n.mutable_constant()->set_float_value(value);
  for (int64_t d : shape) n.mutable_constant()->add_shape(d);
  return n;
}

inline v1::Node op(uint64_t id, v1::Op o, std::vector<uint64_t> src, v1::DType dtype = v1::DTYPE_UNSPECIFIED) {
  v1::Node n;
  n.set_id(id);
  n.set_op(o);
  n.set_dtype(dtype);
  for (uint64_t s : src) n.add_src(s);
  return n;
}

inline v1::Node reduce(uint64_t id, v1::Op o, uint64_t src, std::vector<int64_t> axes) {
  v1::Node n = op(id, o, {src});
  for (int64_t a : axes) n.mutable_axes()->add_axes(a);
  return n;
}

inline v1::Node reshape(uint64_t id, uint64_t src, std::vector<int64_t> shape) {
  v1::Node n = op(id, v1::RESHAPE, {src});
  for (int64_t d : shape) n.mutable_shape()->add_dims(d);
  return n;
}

// x + 1 where x is one inline float `v` broadcast to n elements: nodes x..x+3, the sum last. Every
// call with the same n has the same structure, so the second is a schedule-cache hit.
inline std::vector<v1::Node> broadcast_plus_one(uint64_t x, float v, int64_t n) {
  v1::Node expand = reshape(x + 1, x, {n});
  expand.set_op(v1::EXPAND);
  return {inline_buffer(x, v1::FLOAT32, {1}, bytes_of(std::vector<float>{v})), expand, float_const(x + 2, 1.0, {n}),
          op(x + 3, v1::ADD, {x + 1, x + 2})};
}

// The value of one series (`name{labels}` as the page writes it) on a rendered /metrics page, or
// `absent` when the page has none.
inline double series_in(const std::string& text, const std::string& series, double absent = 0.0) {
  const size_t at = text.find("\n" + series + " ");
  return at == std::string::npos ? absent : std::stod(text.substr(at + series.size() + 2));
}

// How many realizes have waited in the worker pool's queue (those not answered on the gRPC thread).
inline double queued_realizes(const std::string& metrics_text) {
  return series_in(metrics_text, "polygradd_queue_duration_seconds_count{method=\"Realize\"}");
}

// A new session's id (empty, with a test failure, when CreateSession fails).
inline std::string create_session(v1::Polygrad::Stub& stub) {
  grpc::ClientContext ctx;
  v1::CreateSessionResponse resp;
  grpc::Status s = stub.CreateSession(&ctx, v1::CreateSessionRequest(), &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return resp.session_id();
}

inline grpc::Status close_session(v1::Polygrad::Stub& stub, const std::string& id) {
  grpc::ClientContext ctx;
  v1::CloseSessionRequest req;
  req.set_session_id(id);
  v1::CloseSessionResponse resp;
  return stub.CloseSession(&ctx, req, &resp);
}

inline std::unique_ptr<v1::Polygrad::Stub> make_stub(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  return v1::Polygrad::NewStub(grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
}


// tests/tools/held-compiler behind a gate directory of its own, for tests that need a realize
// held in flight by an event they control rather than by a guess at how long compiling takes.
// Give path() as ServerOptions::compiler; the gate starts open, so the compiler probe at start-up
// runs. hold() makes every later compile wait, held() says one is waiting (so the request that
// needs it is in flight), release() lets them all run; the destructor releases too.
class HeldCompiler {
 public:
  explicit HeldCompiler(const std::filesystem::path& dir) : gate_(dir / "compiler-gate") {
    std::filesystem::create_directories(gate_);
    std::filesystem::create_symlink(std::filesystem::path(POLYGRAD_TEST_TOOLS_DIR) / "held-compiler", gate_ / "cc");
    release();
  }
  ~HeldCompiler() { release(); }
  HeldCompiler(const HeldCompiler&) = delete;
  HeldCompiler& operator=(const HeldCompiler&) = delete;

  std::string path() const { return (gate_ / "cc").string(); }
  void hold() {
    std::error_code ec;
    std::filesystem::remove(gate_ / "open", ec);
  }
  void release() { std::ofstream(gate_ / "open").flush(); }
  bool held() const { return !held_pids().empty(); }
  // The compiler processes that were held (running or not): from the `held.<pid>` files.
  std::vector<pid_t> held_pids() const {
    std::vector<pid_t> pids;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(gate_, ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("held.", 0) == 0) pids.push_back(static_cast<pid_t>(std::stol(name.substr(5))));
    }
    return pids;
  }
  // True when no held compiler process runs any more.
  bool all_held_gone() const {
    for (pid_t p : held_pids())
      if (running(p)) return false;
    return true;
  }

 private:
  std::filesystem::path gate_;
};

}  // namespace polygrad::server::testing
