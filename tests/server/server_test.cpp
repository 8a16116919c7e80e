// The daemon in-process on ephemeral ports, driven through the generated C++ stub.
// Sorted by intent: correctness, then errors and limits, then lifecycle (sessions, streams,
// health, metrics).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <mutex>
#include <numeric>
#include <set>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <grpcpp/generic/generic_stub.h>

#include "core/runtime/buffer.h"
#include "server/memory_trim.h"
#include "server/server.h"
#include "test_util.h"

namespace polygrad::server {
namespace {

using namespace polygrad::server::testing;  // NOLINT
namespace fs = std::filesystem;

// Captured log lines (the tests check that errors are logged with method and session).
struct LogCapture {
  std::mutex mu;
  std::vector<std::string> lines;
  LogSink sink() {
    return [this](std::string_view l) {
      std::lock_guard lock(mu);
      lines.emplace_back(l);
    };
  }
  bool contains_all(std::initializer_list<std::string_view> parts) {
    std::lock_guard lock(mu);
    for (const std::string& l : lines) {
      bool all = true;
      for (std::string_view p : parts) all = all && l.find(p) != std::string::npos;
      if (all) return true;
    }
    return false;
  }
};

// Destroys `server`. A shutdown that does not finish within 120 s aborts the test with the
// daemon's log (`logs`, may be null; the shutdown steps are logged at debug), rather than leaving
// ctest to time out with nothing to show.
void stop_server(std::unique_ptr<Server>& server, LogCapture* logs) {
  std::promise<void> stopped;
  std::thread watchdog([done = stopped.get_future(), logs] {
    if (done.wait_for(std::chrono::seconds(120)) == std::future_status::ready) return;
    std::fprintf(stderr, "the test server did not shut down within 120 s\n");
    if (logs != nullptr) {
      std::lock_guard lock(logs->mu);
      for (const std::string& l : logs->lines) std::fprintf(stderr, "%s\n", l.c_str());
    }
    // Where every thread stands, for a hang seen once under TSan and not reproduced since.
    std::fflush(stderr);
    if (std::system("command -v gdb > /dev/null 2>&1") == 0) {
      const std::string gdb = "gdb -p " + std::to_string(getpid()) + " -batch -ex 'thread apply all bt' >&2 2>/dev/null";
      (void)std::system(gdb.c_str());
    }
    std::abort();
  });
  server.reset();
  stopped.set_value();
  watchdog.join();
}

fs::path make_temp_dir() {
  std::string tmpl = (fs::temp_directory_path() / "polygrad-server-test-XXXXXX").string();
  char* dir = mkdtemp(tmpl.data());
  if (dir == nullptr) throw std::runtime_error("mkdtemp failed");
  return fs::path(dir);
}

ServerOptions test_options(const fs::path& dir, LogCapture* logs) {
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.unix_socket.clear();
  o.metrics_listen.clear();
  o.cache_dir = dir / "cache";
  o.log_level = LogLevel::Debug;
  o.log_sink = logs != nullptr ? logs->sink() : [](std::string_view) {};
  return o;
}

// One daemon shared by the ServerTest cases of this process, started on first use (ctest
// runs each test in its own process). It serves no /metrics: prometheus-cpp's Exposer takes
// ~2 s to stop, so only MetricsTest starts one.
class SharedServer : public ::testing::Environment {
 public:
  void TearDown() override {
    stop_server(server_, &logs_);
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  static Server& server() {
    if (!server_) {
      dir_ = make_temp_dir();
      ServerOptions o = test_options(dir_, &logs_);
      o.unix_socket = (dir_ / "polygradd.sock").string();
      absl::StatusOr<std::unique_ptr<Server>> s = Server::start(std::move(o));
      if (!s.ok()) throw std::runtime_error("cannot start the test server: " + s.status().ToString());
      server_ = *std::move(s);
    }
    return *server_;
  }
  static LogCapture& logs() { return logs_; }

 private:
  static inline std::unique_ptr<Server> server_;
  static inline LogCapture logs_;
  static inline fs::path dir_;
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new SharedServer);

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    stub_ = make_stub(SharedServer::server().tcp_address());
  }

  std::string create_session() {
    std::string id = testing::create_session(*stub_);
    EXPECT_EQ(id.size(), 32u);
    return id;
  }
  grpc::Status close_session(const std::string& id) { return testing::close_session(*stub_, id); }

  grpc::Status realize(const std::string& session, std::vector<v1::Node> nodes, std::vector<uint64_t> outputs,
                       v1::RealizeResponse* resp, bool want_data = true) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    v1::RealizeRequest req;
    req.set_session_id(session);
    for (v1::Node& n : nodes) *req.add_nodes() = std::move(n);
    for (uint64_t o : outputs) req.add_outputs(o);
    req.set_want_data(want_data);
    return stub_->Realize(&ctx, req, resp);
  }

  grpc::Status release(const std::string& session, std::vector<uint64_t> nodes, std::vector<uint64_t> handles) {
    grpc::ClientContext ctx;
    v1::ReleaseRequest req;
    req.set_session_id(session);
    for (uint64_t n : nodes) req.add_node_ids(n);
    for (uint64_t h : handles) req.add_handles(h);
    v1::ReleaseResponse resp;
    return stub_->Release(&ctx, req, &resp);
  }

  grpc::Status upload(const std::string& session, v1::DType dtype, std::vector<int64_t> shape, const std::string& data,
                      size_t chunk, v1::UploadResponse* resp) {
    grpc::ClientContext ctx;
    auto writer = stub_->Upload(&ctx, resp);
    size_t offset = 0;
    bool first = true;
    while (first || offset < data.size()) {
      v1::UploadChunk c;
      if (first) {
        c.mutable_header()->set_session_id(session);
        c.mutable_header()->set_dtype(dtype);
        for (int64_t d : shape) c.mutable_header()->add_shape(d);
        first = false;
      }
      const size_t n = std::min(chunk, data.size() - offset);
      c.set_data(data.substr(offset, n));
      offset += n;
      if (!writer->Write(c)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }

  grpc::Status download(const std::string& session, uint64_t handle, uint64_t chunk_bytes, std::string* data,
                        std::vector<v1::DownloadChunk>* chunks = nullptr) {
    grpc::ClientContext ctx;
    v1::DownloadRequest req;
    req.set_session_id(session);
    req.set_handle(handle);
    req.set_chunk_bytes(chunk_bytes);
    auto reader = stub_->Download(&ctx, req);
    v1::DownloadChunk c;
    while (reader->Read(&c)) {
      EXPECT_EQ(c.offset(), data->size());
      data->append(c.data());
      if (chunks != nullptr) chunks->push_back(c);
    }
    return reader->Finish();
  }

  static std::vector<float> iota_floats(size_t n, float start = 1.0f) {
    std::vector<float> v(n);
    std::iota(v.begin(), v.end(), start);
    return v;
  }

  std::unique_ptr<v1::Polygrad::Stub> stub_;
};

// ---- correctness ----------------------------------------------------------------------------

TEST_F(ServerTest, GetInfoReportsVersionDevicesAndLimits) {
  grpc::ClientContext ctx;
  v1::ServerInfo info;
  ASSERT_TRUE(stub_->GetInfo(&ctx, v1::GetInfoRequest(), &info).ok());
  EXPECT_EQ(info.version(), std::string(version()));
  ASSERT_GE(info.devices_size(), 1);
  EXPECT_EQ(info.devices(0).name(), "CPU");
  EXPECT_EQ(info.max_inline_bytes(), 1u << 20);
  EXPECT_EQ(info.max_rank(), 16u);
  EXPECT_EQ(info.max_nodes_per_request(), 100000u);
  EXPECT_EQ(info.max_elements(), uint64_t{1} << 31);
  EXPECT_EQ(info.chunk_bytes(), 1u << 20);
}

TEST_F(ServerTest, RealizeBufferPlusConstReduceSum) {
  const std::string sid = create_session();
  const std::vector<float> x = iota_floats(6);  // [[1,2,3],[4,5,6]]
  v1::RealizeResponse resp;
  grpc::Status s = realize(sid,
                           {inline_buffer(1, v1::FLOAT32, {2, 3}, bytes_of(x)), float_const(2, 0.5, {2, 3}),
                            op(3, v1::ADD, {1, 2}, v1::FLOAT32), reduce(4, v1::REDUCE_SUM, 3, {1})},
                           {4, 3}, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(resp.results_size(), 2);
  const v1::TensorResult& sum = resp.results(0);
  EXPECT_EQ(sum.node_id(), 4u);
  EXPECT_NE(sum.handle(), 0u);
  EXPECT_EQ(sum.dtype(), v1::FLOAT32);
  EXPECT_EQ(std::vector<int64_t>(sum.shape().begin(), sum.shape().end()), (std::vector<int64_t>{2, 1}));
  ASSERT_TRUE(sum.has_data());
  std::vector<float> got = values_of<float>(sum.data());
  std::vector<float> want = {0, 0};
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 3; ++c) want[r] += x[r * 3 + c] + 0.5f;
  }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_FLOAT_EQ(got[0], want[0]);
  EXPECT_FLOAT_EQ(got[1], want[1]);
  std::vector<float> added = values_of<float>(resp.results(1).data());
  ASSERT_EQ(added.size(), 6u);
  for (size_t i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(added[i], x[i] + 0.5f);
  EXPECT_GE(resp.stats().seconds(), 0.0);

  // A later request builds on the realized node and on a handle.
  v1::RealizeResponse more;
  s = realize(sid, {op(5, v1::MUL, {4, 4}), handle_buffer(6, sum.handle()), op(7, v1::SUB, {5, 6})}, {7}, &more);
  ASSERT_TRUE(s.ok()) << s.error_message();
  std::vector<float> got7 = values_of<float>(more.results(0).data());
  ASSERT_EQ(got7.size(), 2u);
  EXPECT_FLOAT_EQ(got7[0], want[0] * want[0] - want[0]);
  EXPECT_FLOAT_EQ(got7[1], want[1] * want[1] - want[1]);

  // The handle downloads the same bytes.
  std::string data;
  ASSERT_TRUE(download(sid, sum.handle(), 0, &data).ok());
  EXPECT_EQ(data, sum.data());
  EXPECT_TRUE(close_session(sid).ok());
}

TEST_F(ServerTest, GradientAndCompositeOps) {
  const std::string sid = create_session();
  const std::vector<float> x = iota_floats(6);  // [[1,2,3],[4,5,6]]
  v1::Node softmax = op(4, v1::SOFTMAX, {1});
  softmax.mutable_composite()->add_axes(-1);
  v1::RealizeResponse resp;
  // loss = sum(x * x); d loss / dx = 2x. Softmax and matmul are expanded by the daemon.
  grpc::Status s = realize(sid,
                           {inline_buffer(1, v1::FLOAT32, {2, 3}, bytes_of(x)), op(2, v1::MUL, {1, 1}),
                            reduce(3, v1::REDUCE_SUM, 2, {0, 1}), softmax, op(5, v1::GRADIENT, {3, 1}),
                            reshape(6, 1, {3, 2}), op(7, v1::MATMUL, {1, 6})},
                           {5, 4, 7}, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  std::vector<float> grad = values_of<float>(resp.results(0).data());
  ASSERT_EQ(grad.size(), 6u);
  for (size_t i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(grad[i], 2 * x[i]);
  std::vector<float> sm = values_of<float>(resp.results(1).data());
  for (int r = 0; r < 2; ++r) {
    float z = 0;
    for (int c = 0; c < 3; ++c) z += std::exp(x[r * 3 + c]);
    for (int c = 0; c < 3; ++c) EXPECT_NEAR(sm[r * 3 + c], std::exp(x[r * 3 + c]) / z, 1e-6);
  }
  std::vector<float> mm = values_of<float>(resp.results(2).data());
  ASSERT_EQ(mm.size(), 4u);  // (2,3) @ (3,2): x reshaped is [[1,2],[3,4],[5,6]]
  EXPECT_FLOAT_EQ(mm[0], 1 * 1 + 2 * 3 + 3 * 5);
  EXPECT_FLOAT_EQ(mm[3], 4 * 2 + 5 * 4 + 6 * 6);

  // A composite without its axis names the node and the problem.
  v1::RealizeResponse bad;
  s = realize(sid, {op(8, v1::SOFTMAX, {1})}, {8}, &bad);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("node 8 (SOFTMAX)"), std::string::npos) << s.error_message();
  v1::Node no_axis = op(9, v1::SOFTMAX, {1});
  no_axis.mutable_composite();
  s = realize(sid, {no_axis}, {9}, &bad);
  EXPECT_NE(s.error_message().find("exactly one axis"), std::string::npos) << s.error_message();
  // A gradient of an integer loss is refused.
  s = realize(sid, {inline_buffer(10, v1::INT32, {2}, bytes_of(std::vector<int32_t>{1, 2})), op(11, v1::GRADIENT, {10, 1})},
              {11}, &bad);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(close_session(sid).ok());
}

TEST_F(ServerTest, ConvPoolingAndIndexOps) {
  const std::string sid = create_session();
  // x (1,1,4,4) = 1..16; a 2x2 all-ones kernel with stride 2 sums each 2x2 block.
  v1::Node conv = op(3, v1::CONV2D, {1, 2});
  conv.mutable_composite()->add_stride(2);
  conv.mutable_composite()->add_stride(2);
  v1::Node pool = op(4, v1::MAX_POOL2D, {1});
  pool.mutable_composite()->add_kernel(2);
  pool.mutable_composite()->add_kernel(2);
  v1::Node ar = op(5, v1::ARANGE, {}, v1::INT32);
  ar.mutable_shape()->add_dims(5);
  v1::Node am = reduce(6, v1::ARGMAX, 1, {});
  am.clear_axes();
  am.mutable_composite()->add_axes(-1);
  v1::Node cs = op(7, v1::CUMSUM, {1});
  cs.mutable_composite()->add_axes(3);
  v1::RealizeResponse resp;
  grpc::Status s = realize(sid,
                           {inline_buffer(1, v1::FLOAT32, {1, 1, 4, 4}, bytes_of(iota_floats(16))), float_const(2, 1.0, {1, 1, 2, 2}),
                            conv, pool, ar, am, cs},
                           {3, 4, 5, 6, 7}, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(values_of<float>(resp.results(0).data()), (std::vector<float>{1 + 2 + 5 + 6, 3 + 4 + 7 + 8, 9 + 10 + 13 + 14, 11 + 12 + 15 + 16}));
  EXPECT_EQ(values_of<float>(resp.results(1).data()), (std::vector<float>{6, 8, 14, 16}));
  EXPECT_EQ(values_of<int32_t>(resp.results(2).data()), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(values_of<int32_t>(resp.results(3).data()), (std::vector<int32_t>{3, 3, 3, 3}));
  std::vector<float> c = values_of<float>(resp.results(4).data());
  EXPECT_EQ(std::vector<float>(c.begin(), c.begin() + 4), (std::vector<float>{1, 3, 6, 10}));

  // ARANGE needs a dtype and one dimension; conv2d with mismatched groups is named.
  v1::RealizeResponse bad;
  v1::Node no_dtype = op(8, v1::ARANGE, {});
  no_dtype.mutable_shape()->add_dims(3);
  s = realize(sid, {no_dtype}, {8}, &bad);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("node 8 (ARANGE)"), std::string::npos) << s.error_message();
  v1::Node bad_groups = op(9, v1::CONV2D, {1, 2});
  bad_groups.mutable_composite()->set_groups(3);
  s = realize(sid, {bad_groups}, {9}, &bad);
  EXPECT_NE(s.error_message().find("groups=3"), std::string::npos) << s.error_message();

  // ARANGE's optional sources, start and step, make start + i * step in the node's dtype: from
  // 1.5 by -0.5. One source, or a start of another dtype, is refused with what ARANGE takes.
  auto arange = [&](uint64_t id, std::vector<uint64_t> src) {
    v1::Node n = op(id, v1::ARANGE, std::move(src), v1::FLOAT32);
    n.mutable_shape()->add_dims(4);
    return n;
  };
  s = realize(sid, {float_const(10, 1.5, {}), float_const(11, -0.5, {}), arange(12, {10, 11})}, {12}, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(values_of<float>(resp.results(0).data()), (std::vector<float>{1.5, 1, 0.5, 0}));
  s = realize(sid, {arange(13, {10})}, {13}, &bad);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("node 13 (ARANGE): ARANGE takes no sources, or two: start and step"), std::string::npos)
      << s.error_message();
  s = realize(sid, {float_const(14, 1.0, {}, v1::FLOAT64), arange(15, {14, 11})}, {15}, &bad);
  EXPECT_NE(s.error_message().find("arange's start must be float32 (the node's dtype), got float64"), std::string::npos)
      << s.error_message();
  EXPECT_TRUE(close_session(sid).ok());
}

TEST_F(ServerTest, CatJoinsItsSourcesAlongAnAxisAndNamesWhatDoesNotFit) {
  const std::string sid = create_session();
  // (2, 1) of 1, 2 joined with (2, 2) of -0.0 along axis -1: each element is its source's bits.
  auto cat = [](uint64_t id, std::vector<uint64_t> src, int64_t axis) {
    v1::Node n = op(id, v1::CAT, std::move(src));
    n.mutable_composite()->add_axes(axis);
    return n;
  };
  v1::RealizeResponse resp;
  grpc::Status s = realize(sid,
                           {inline_buffer(1, v1::FLOAT32, {2, 1}, bytes_of(std::vector<float>{1, 2})),
                            float_const(2, -0.0, {2, 2}), cat(3, {1, 2}, -1)},
                           {3}, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const auto& shape = resp.results(0).shape();
  EXPECT_EQ(std::vector<int64_t>(shape.begin(), shape.end()), (std::vector<int64_t>{2, 3}));
  const std::vector<float> v = values_of<float>(resp.results(0).data());
  ASSERT_EQ(v.size(), 6u);
  EXPECT_EQ(v[0], 1);
  EXPECT_EQ(v[3], 2);
  for (size_t i : {1, 2, 4, 5}) EXPECT_TRUE(std::signbit(v[i])) << i;
  auto expect_error = [&](std::vector<v1::Node> nodes, uint64_t id, const std::string& text) {
    v1::RealizeResponse bad;
    grpc::Status st = realize(sid, nodes, {id}, &bad);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
    EXPECT_NE(st.error_message().find(text), std::string::npos) << st.error_message();
  };
  expect_error({cat(4, {1, 2}, 0)}, 4, "node 4 (CAT): cat: source 1 has shape (2, 2), source 0 (2, 1): they differ off axis 0");
  expect_error({float_const(5, 1.0, {2, 1}, v1::FLOAT64), cat(6, {1, 5}, 1)}, 6,
               "cat: source 1 is float64, source 0 is float32 (cast explicitly)");
  expect_error({cat(7, {1, 2}, 2)}, 7, "cat: axis 2 is out of range for rank 2");
  expect_error({op(8, v1::CAT, {1, 2})}, 8, "node 8 (CAT)");
  EXPECT_TRUE(close_session(sid).ok());
}

TEST_F(ServerTest, WindowOpsTakeOneToThreeSpatialAxes) {
  const std::string sid = create_session();
  // x (1,1,4,4) = 1..16. A 1-D max pool (kernel [3], stride 1) over each row of 4, with torch's
  // indices: the maxima are the windows' last elements, at row positions 2 and 3.
  v1::Node idx = op(3, v1::MAX_POOL2D, {1});
  idx.mutable_composite()->add_kernel(3);
  idx.mutable_composite()->add_stride(1);
  idx.mutable_composite()->set_indices(true);
  // A 3-D mean over (1,4,4) with a (1,2,2) kernel: the 2x2 block means.
  v1::Node avg3 = op(4, v1::AVG_POOL2D, {1});
  for (int64_t k : {1, 2, 2}) avg3.mutable_composite()->add_kernel(k);
  v1::RealizeResponse resp;
  grpc::Status s = realize(sid, {inline_buffer(1, v1::FLOAT32, {1, 1, 4, 4}, bytes_of(iota_floats(16))), idx, avg3},
                           {3, 4}, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(values_of<int32_t>(resp.results(0).data()), (std::vector<int32_t>{2, 3, 2, 3, 2, 3, 2, 3}));
  EXPECT_EQ(values_of<float>(resp.results(1).data()), (std::vector<float>{3.5, 5.5, 11.5, 13.5}));

  // Each error names the op and what is wrong with the shapes or lists.
  auto expect_error = [&](v1::Node node, std::vector<v1::Node> extra, grpc::StatusCode code, const std::string& text) {
    v1::RealizeResponse bad;
    uint64_t id = node.id();
    extra.push_back(std::move(node));
    grpc::Status st = realize(sid, extra, {id}, &bad);
    EXPECT_EQ(st.error_code(), code) << st.error_message();
    EXPECT_NE(st.error_message().find(text), std::string::npos) << st.error_message();
  };
  v1::Node four = op(10, v1::MAX_POOL2D, {1});
  for (int i = 0; i < 4; ++i) four.mutable_composite()->add_kernel(1);
  expect_error(four, {}, grpc::StatusCode::INVALID_ARGUMENT, "node 10 (MAX_POOL2D): pools over the last len(kernel) axes, 1 to 3");
  // A weight of rank 6 (4 spatial axes), and a 2-D weight for a 3-D input.
  v1::Node rank6 = op(11, v1::CONV2D, {1, 5});
  rank6.mutable_composite()->set_groups(1);
  v1::Node rank_mismatch = op(12, v1::CONV_TRANSPOSE2D, {6, 2});
  rank_mismatch.mutable_composite()->set_groups(1);
  expect_error(rank6, {float_const(5, 1.0, {1, 1, 1, 1, 1, 1})}, grpc::StatusCode::INVALID_ARGUMENT,
               "node 11 (CONV2D): takes an input (N, C, *spatial) and a weight (O, C/groups, *kernel) of the same rank");
  expect_error(rank_mismatch, {float_const(6, 1.0, {1, 1, 2, 2, 2}), float_const(2, 1.0, {1, 1, 2, 2})},
               grpc::StatusCode::INVALID_ARGUMENT, "got input (1, 1, 2, 2, 2) and weight (1, 1, 2, 2)");
  v1::Node stride3 = op(13, v1::CONV2D, {1, 2});
  for (int i = 0; i < 3; ++i) stride3.mutable_composite()->add_stride(1);
  expect_error(stride3, {float_const(2, 1.0, {1, 1, 2, 2})}, grpc::StatusCode::INVALID_ARGUMENT,
               "stride needs 2 values (one per spatial axis), got 3");
  v1::Node pad5 = op(14, v1::AVG_POOL2D, {1});
  pad5.mutable_composite()->add_kernel(2);
  for (int i = 0; i < 5; ++i) pad5.mutable_composite()->add_padding(0);
  expect_error(pad5, {}, grpc::StatusCode::INVALID_ARGUMENT, "padding needs 1 values (one per spatial axis) or 2");
  v1::Node opad = op(15, v1::CONV_TRANSPOSE2D, {1, 2});
  opad.mutable_composite()->add_output_padding(1);
  expect_error(opad, {float_const(2, 1.0, {1, 1, 2, 2})}, grpc::StatusCode::INVALID_ARGUMENT,
               "output_padding needs 2 values (one per spatial axis), got 1");
  // Work beyond max_work: 39951^2 windows of 2500 elements from a cheap constant.
  v1::Node big = op(16, v1::MAX_POOL2D, {7});
  for (int i = 0; i < 2; ++i) big.mutable_composite()->add_kernel(50), big.mutable_composite()->add_stride(1);
  expect_error(big, {float_const(7, 1.0, {40000, 40000})}, grpc::StatusCode::RESOURCE_EXHAUSTED,
               "node 16 (MAX_POOL2D): MAX_POOL2D's work: output (39951, 39951) times window (50, 50) [39951,39951,50,50] "
               "is more work than max_work");
  // Padding that makes the input itself too big, and a padding value over max_elements.
  v1::Node wide = op(17, v1::AVG_POOL2D, {1});
  for (int i = 0; i < 2; ++i) wide.mutable_composite()->add_kernel(1), wide.mutable_composite()->add_padding(40000);
  expect_error(wide, {}, grpc::StatusCode::RESOURCE_EXHAUSTED, "AVG_POOL2D's padded input");
  v1::Node huge = op(18, v1::CONV2D, {1, 2});
  huge.mutable_composite()->add_padding(int64_t{1} << 62);
  huge.mutable_composite()->add_padding(0);
  expect_error(huge, {float_const(2, 1.0, {1, 1, 2, 2})}, grpc::StatusCode::RESOURCE_EXHAUSTED, "padding value");
  // counted_padding: more than the padding, on a max pool, or not in padding's form.
  v1::Node over = op(19, v1::AVG_POOL2D, {1});
  for (int i = 0; i < 2; ++i) over.mutable_composite()->add_kernel(2), over.mutable_composite()->add_padding(1);
  for (int i = 0; i < 2; ++i) over.mutable_composite()->add_counted_padding(2);
  expect_error(over, {}, grpc::StatusCode::INVALID_ARGUMENT,
               "node 19 (AVG_POOL2D): counted_padding (2, 2) exceeds the padding (1, 1) of spatial axis 0");
  v1::Node on_max = op(20, v1::MAX_POOL2D, {1});
  on_max.mutable_composite()->add_kernel(2);
  on_max.mutable_composite()->add_counted_padding(0);
  expect_error(on_max, {}, grpc::StatusCode::INVALID_ARGUMENT, "counted_padding is for AVG_POOL2D only");
  v1::Node form = op(21, v1::AVG_POOL2D, {1});
  for (int i = 0; i < 2; ++i) form.mutable_composite()->add_kernel(2), form.mutable_composite()->add_padding(1);
  form.mutable_composite()->add_counted_padding(0);
  expect_error(form, {}, grpc::StatusCode::INVALID_ARGUMENT, "counted_padding needs padding's form (2 values), got 1");
  // (1, 1, 4, 4) with padding 1 and none counted: each 2x2 corner window holds one input element.
  v1::Node excl = op(22, v1::AVG_POOL2D, {1});
  for (int i = 0; i < 2; ++i) {
    excl.mutable_composite()->add_kernel(2), excl.mutable_composite()->add_padding(1);
    excl.mutable_composite()->add_counted_padding(0);
  }
  v1::RealizeResponse means;
  ASSERT_TRUE(realize(sid, {excl}, {22}, &means).ok());
  const std::vector<float> m = values_of<float>(means.results(0).data());
  ASSERT_EQ(m.size(), 9u);
  EXPECT_EQ(m[0], 1);                         // 1..16 row-major: (0, 0) alone
  EXPECT_EQ(m[1], 2.5f);                      // (2 + 3) / 2
  EXPECT_EQ(m[4], (6 + 7 + 10 + 11) / 4.0f);  // an inner window: all four count
  // ceil_mode: a 3x3 stride-2 pool of 1..16 keeps the last partial windows, whose padding never
  // counts in a mean (torch's ceil_mode); a convolution refuses it.
  v1::Node ceil_avg = op(29, v1::AVG_POOL2D, {1});
  for (int i = 0; i < 2; ++i) ceil_avg.mutable_composite()->add_kernel(3), ceil_avg.mutable_composite()->add_stride(2);
  ceil_avg.mutable_composite()->set_ceil_mode(true);
  v1::Node ceil_max = ceil_avg;
  ceil_max.set_id(30);
  ceil_max.set_op(v1::MAX_POOL2D);
  v1::RealizeResponse ceiled;
  ASSERT_TRUE(realize(sid, {ceil_avg, ceil_max}, {29, 30}, &ceiled).ok());
  EXPECT_EQ(values_of<float>(ceiled.results(0).data()), (std::vector<float>{6, 7.5, 12, 13.5}));
  EXPECT_EQ(values_of<float>(ceiled.results(1).data()), (std::vector<float>{11, 12, 15, 16}));
  v1::Node ceil_conv = op(31, v1::CONV2D, {1, 32});
  ceil_conv.mutable_composite()->set_ceil_mode(true);
  expect_error(ceil_conv, {float_const(32, 1.0, {1, 1, 2, 2})}, grpc::StatusCode::INVALID_ARGUMENT,
               "node 31 (CONV2D): ceil_mode is for MAX_POOL2D and AVG_POOL2D only");
  // A convolution's optional third source is its bias, added per output channel: a 2x2 stride-2
  // sum of 1..16 plus 0.5. A bias not of (O,) and x's dtype is refused with what it should be.
  v1::Node biased = op(23, v1::CONV2D, {1, 24, 25});
  for (int i = 0; i < 2; ++i) biased.mutable_composite()->add_stride(2);
  v1::RealizeResponse sums;
  ASSERT_TRUE(realize(sid, {float_const(24, 1.0, {1, 1, 2, 2}), float_const(25, 0.5, {1}), biased}, {23}, &sums).ok());
  EXPECT_EQ(values_of<float>(sums.results(0).data()), (std::vector<float>{14.5, 22.5, 46.5, 54.5}));
  v1::Node wrong_bias = op(26, v1::CONV_TRANSPOSE2D, {1, 24, 27});
  wrong_bias.mutable_composite()->set_groups(1);
  expect_error(wrong_bias, {float_const(27, 0.5, {2})}, grpc::StatusCode::INVALID_ARGUMENT,
               "node 26 (CONV_TRANSPOSE2D): bias must be float32 of shape (1), got float32 (2)");
  v1::Node pool_bias = op(28, v1::MAX_POOL2D, {1, 25});
  pool_bias.mutable_composite()->add_kernel(2);
  expect_error(pool_bias, {}, grpc::StatusCode::INVALID_ARGUMENT, "node 28 (MAX_POOL2D): takes 1 source");
  EXPECT_TRUE(close_session(sid).ok());
}

TEST_F(ServerTest, RealizedNodesStandForTheirBuffer) {
  // A loop of updates p = p - 0.5 * p, each realized. Later nodes must refer to the realized
  // buffer, not to the chain of earlier steps: a loss built from the last p then does not
  // depend on the first step's p at all (its gradient there is zero), and the daemon holds no
  // history for a long training loop.
  const std::string sid = create_session();
  v1::RealizeResponse resp;
  ASSERT_TRUE(realize(sid, {inline_buffer(1, v1::FLOAT32, {2}, bytes_of(std::vector<float>{8, 16}))}, {1}, &resp).ok());
  uint64_t p = 1, id = 2, first_step = 0;
  for (int step = 0; step < 3; ++step) {
    uint64_t half = id++, scaled = id++, next = id++;
    ASSERT_TRUE(realize(sid, {float_const(half, 0.5, {2}), op(scaled, v1::MUL, {p, half}), op(next, v1::SUB, {p, scaled})},
                        {next}, &resp).ok());
    p = next;
    if (step == 0) first_step = next;
  }
  std::vector<float> v = values_of<float>(resp.results(0).data());
  EXPECT_FLOAT_EQ(v[0], 1);
  EXPECT_FLOAT_EQ(v[1], 2);
  uint64_t sq = id++, loss = id++, g = id++, g_first = id++;
  ASSERT_TRUE(realize(sid, {op(sq, v1::MUL, {p, p}), reduce(loss, v1::REDUCE_SUM, sq, {0}), op(g, v1::GRADIENT, {loss, p}),
                            op(g_first, v1::GRADIENT, {loss, first_step})},
                      {g, g_first}, &resp).ok());
  std::vector<float> grad = values_of<float>(resp.results(0).data());
  EXPECT_FLOAT_EQ(grad[0], 2 * v[0]);
  EXPECT_FLOAT_EQ(grad[1], 2 * v[1]);
  std::vector<float> through_history = values_of<float>(resp.results(1).data());
  EXPECT_FLOAT_EQ(through_history[0], 0);
  EXPECT_FLOAT_EQ(through_history[1], 0);
  EXPECT_TRUE(close_session(sid).ok());
}

TEST_F(ServerTest, EagerStepsReuseTheScheduleWithFreshResults) {
  // An eager loop p = 0.75 * p + x: each step sends new nodes of the same structure over a new
  // inline x and the previous step's realized p, so the schedule cache answers from the second
  // step on, and every step still gets a result buffer (and handle) of its own.
  Server& server = SharedServer::server();
  auto series = [&](const std::string& name) { return series_in(server.metrics().render(), name, -1.0); };
  const std::string hit_series = "polygradd_schedule_cache_lookups_total{result=\"hit\"}";
  const double hits_before = series(hit_series);
  const std::string sid = create_session();
  v1::RealizeResponse resp;
  std::vector<float> want{1, 2, 3};
  ASSERT_TRUE(realize(sid, {inline_buffer(1, v1::FLOAT32, {3}, bytes_of(want))}, {1}, &resp).ok());
  uint64_t p = 1, id = 2;
  std::set<uint64_t> handles;
  int hits = 0;
  for (int step = 0; step < 4; ++step) {
    const auto s = static_cast<float>(step);
    const std::vector<float> x{s, s + 1, -s};
    const uint64_t xid = id++, c = id++, scaled = id++, next = id++;
    ASSERT_TRUE(realize(sid, {inline_buffer(xid, v1::FLOAT32, {3}, bytes_of(x)), float_const(c, 0.75, {3}),
                              op(scaled, v1::MUL, {p, c}), op(next, v1::ADD, {scaled, xid})},
                        {next}, &resp).ok());
    std::vector<float> got = values_of<float>(resp.results(0).data());
    for (size_t i = 0; i < 3; ++i) {
      want[i] = 0.75f * want[i] + x[i];
      EXPECT_FLOAT_EQ(got.at(i), want[i]) << "step " << step << " element " << i;
    }
    if (step > 0) {
      EXPECT_TRUE(resp.stats().schedule_cache_hit()) << "step " << step;
      EXPECT_EQ(resp.stats().compiled(), 0u);
    }
    hits += resp.stats().schedule_cache_hit() ? 1 : 0;
    EXPECT_TRUE(handles.insert(resp.results(0).handle()).second) << "step " << step << " reused a result handle";
    p = next;
  }
  EXPECT_EQ(series(hit_series) - hits_before, hits);
  EXPECT_GE(series("polygradd_schedule_cache_entries"), 1.0);
  EXPECT_TRUE(close_session(sid).ok());
}

TEST_F(ServerTest, SmallCachedRealizesSkipTheWorkerQueue) {
  // A schedule-cache hit of little work is answered on the gRPC thread (call_helpers.cpp,
  // realize_now): it never waits in the worker pool's queue. While no worker is busy "little"
  // is up to kIdleInlineWorkLimit (2^21 iterations). A miss, or a hit of more work, is queued.
  // (The busy pool's smaller limit: GuardTest.ABusyWorkerPoolKeepsTheGrpcThreadsToTinyRealizes.)
  Server& server = SharedServer::server();
  auto queued = [&] { return queued_realizes(server.metrics().render()); };
  const std::string sid = create_session();
  uint64_t id = 1;
  for (int64_t n : {7, 40000, 3000000}) {
    for (int round = 0; round < 2; ++round) {
      // A worker counts as busy until its task has wound down, a little after its answer.
      ASSERT_TRUE(eventually([&] { return server.workers().idle(); }));
      const double before = queued();
      // A new x each round, of the same structure.
      const uint64_t x = id;
      id += 4;
      const float v = static_cast<float>(round) + 2.0f;
      v1::RealizeResponse resp;
      ASSERT_TRUE(realize(sid, broadcast_plus_one(x, v, n), {x + 3}, &resp).ok());
      if (resp.results(0).has_data()) {  // 3M floats are past the inline limit
        const std::vector<float> got = values_of<float>(resp.results(0).data());
        ASSERT_EQ(got.size(), static_cast<size_t>(n));
        EXPECT_FLOAT_EQ(got[n - 1], v + 1.0f);
      }
      EXPECT_EQ(resp.stats().schedule_cache_hit(), round == 1) << n;
      const bool inline_answer = round == 1 && n < 3000000;
      EXPECT_EQ(queued() - before, inline_answer ? 0.0 : 1.0) << n << " elements, round " << round;
    }
  }
  EXPECT_TRUE(close_session(sid).ok());
}

TEST_F(ServerTest, MovementAndWhereOps) {
  const std::string sid = create_session();
  const std::vector<float> x = iota_floats(6, -2.0f);  // -2..3
  v1::Node perm = op(3, v1::PERMUTE, {2});
  perm.mutable_axes()->add_axes(1);
  perm.mutable_axes()->add_axes(0);
  v1::RealizeResponse resp;
  grpc::Status s = realize(sid,
                           {inline_buffer(1, v1::FLOAT32, {6}, bytes_of(x)), reshape(2, 1, {2, 3}), perm,
                            float_const(4, 0.0, {3, 2}), op(5, v1::CMPLT, {4, 3}, v1::BOOL),
                            op(6, v1::WHERE, {5, 3, 4})},
                           {6}, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  std::vector<float> got = values_of<float>(resp.results(0).data());
  // permuted [[-2,1],[-1,2],[0,3]] with negatives zeroed
  std::vector<float> want = {0, 1, 0, 2, 0, 3};
  EXPECT_EQ(got, want);
  EXPECT_TRUE(close_session(sid).ok());
}

TEST_F(ServerTest, LargeResultIsNotInlined) {
  const std::string sid = create_session();
  v1::RealizeResponse resp;
  ASSERT_TRUE(realize(sid, {float_const(1, 1.0, {300000}), op(2, v1::NEG, {1})}, {2}, &resp).ok());
  ASSERT_EQ(resp.results_size(), 1);
  EXPECT_FALSE(resp.results(0).has_data());
  std::string data;
  ASSERT_TRUE(download(sid, resp.results(0).handle(), 0, &data).ok());
  std::vector<float> v = values_of<float>(data);
  ASSERT_EQ(v.size(), 300000u);
  EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](float f) { return f == -1.0f; }));
  EXPECT_TRUE(close_session(sid).ok());
}

TEST_F(ServerTest, UploadAndDownloadFiveMiBInChunks) {
  const std::string sid = create_session();
  const size_t n = (5u << 20) / 4;
  std::vector<int32_t> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = static_cast<int32_t>((i * 7919u) % 1000003u);
  const std::string bytes = bytes_of(values);
  v1::UploadResponse up;
  grpc::Status s = upload(sid, v1::INT32, {static_cast<int64_t>(n)}, bytes, 700 * 1024, &up);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(up.bytes(), bytes.size());

  std::string back;
  std::vector<v1::DownloadChunk> chunks;
  s = download(sid, up.handle(), 0, &back, &chunks);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(back == bytes) << "downloaded bytes differ";
  ASSERT_EQ(chunks.size(), 5u);  // 1 MiB default chunks
  EXPECT_EQ(chunks[0].dtype(), v1::INT32);
  EXPECT_EQ(chunks[0].shape_size(), 1);
  EXPECT_TRUE(chunks.back().last());
  EXPECT_FALSE(chunks[0].last());
  // 1-byte chunks would be a message per byte: the daemon sends 64 KiB ones instead.
  back.clear();
  chunks.clear();
  s = download(sid, up.handle(), 1, &back, &chunks);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(back == bytes) << "downloaded bytes differ";
  EXPECT_EQ(chunks.size(), 80u);  // 5 MiB / 64 KiB

  // The uploaded handle feeds a graph.
  v1::RealizeResponse resp;
  s = realize(sid, {handle_buffer(1, up.handle(), v1::INT32), reduce(2, v1::REDUCE_MAX, 1, {0})}, {2}, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  std::vector<int32_t> mx = values_of<int32_t>(resp.results(0).data());
  ASSERT_EQ(mx.size(), 1u);
  EXPECT_EQ(mx[0], *std::max_element(values.begin(), values.end()));
  EXPECT_TRUE(close_session(sid).ok());
}

// ---- errors and limits ----------------------------------------------------------------------

TEST_F(ServerTest, UnknownSourceIsInvalidArgumentAndSessionStaysUsable) {
  const std::string sid = create_session();
  v1::RealizeResponse resp;
  // Node 10 is fine, node 11 is not: the request adds neither.
  grpc::Status s = realize(sid, {float_const(10, 1.0, {2}), op(11, v1::ADD, {10, 99})}, {11}, &resp);
  EXPECT_CODE(s, INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("node 11 (ADD)"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("99"), std::string::npos) << s.error_message();
  EXPECT_TRUE(SharedServer::logs().contains_all({"request failed", "method=Realize", sid}));

  s = realize(sid, {float_const(10, 1.0, {2}), op(11, v1::ADD, {10, 10})}, {11}, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(values_of<float>(resp.results(0).data()), (std::vector<float>{2, 2}));
  EXPECT_TRUE(close_session(sid).ok());
}

TEST_F(ServerTest, RequestsBehindAFailedOneNameItsError) {
  // Asynchronous dispatch sends request B before A's answer: B reads a node of A, which failed.
  const std::string sid = create_session();
  v1::RealizeResponse resp;
  grpc::Status a = realize(sid, {float_const(20, 1.0, {2}), op(21, v1::ADD, {20, 99})}, {21}, &resp);
  EXPECT_CODE(a, INVALID_ARGUMENT);
  grpc::Status b = realize(sid, {op(22, v1::ADD, {21, 21})}, {22}, &resp);
  EXPECT_CODE(b, INVALID_ARGUMENT);
  EXPECT_NE(b.error_message().find("node 22 (ADD): source 21 failed in an earlier request"), std::string::npos)
      << b.error_message();
  EXPECT_NE(b.error_message().find("source 99 is not defined"), std::string::npos) << b.error_message();
  // A third request behind B still names the first failure, through B's.
  grpc::Status c = realize(sid, {op(23, v1::ADD, {22, 22})}, {23}, &resp);
  EXPECT_NE(c.error_message().find("source 22 failed in an earlier request"), std::string::npos) << c.error_message();
  EXPECT_NE(c.error_message().find("source 99"), std::string::npos) << c.error_message();

  // Releasing the failed ids (the client's nodes died meanwhile) is not an error, once.
  grpc::ClientContext ctx;
  v1::ReleaseRequest rel;
  rel.set_session_id(sid);
  for (uint64_t id : {20, 21, 22, 23}) rel.add_node_ids(id);
  v1::ReleaseResponse released;
  EXPECT_TRUE(stub_->Release(&ctx, rel, &released).ok());
  grpc::ClientContext again;
  EXPECT_EQ(stub_->Release(&again, rel, &released).error_code(), grpc::StatusCode::NOT_FOUND);

  // The ids are free again: resent, they work.
  grpc::Status ok = realize(sid, {float_const(20, 1.0, {2}), op(21, v1::ADD, {20, 20})}, {21}, &resp);
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(values_of<float>(resp.results(0).data()), (std::vector<float>{2, 2}));

  // Releasing forgets what was remembered: an id re-sent in a failed request while the session held
  // it, and one that failed once and was then defined, are plainly unknown once released.
  EXPECT_CODE(realize(sid, {float_const(20, 1.0, {2}), op(24, v1::ADD, {20, 99})}, {24}, &resp), INVALID_ARGUMENT);
  EXPECT_CODE(realize(sid, {op(25, v1::ADD, {98, 98})}, {25}, &resp), INVALID_ARGUMENT);
  ASSERT_TRUE(realize(sid, {op(25, v1::ADD, {21, 21})}, {25}, &resp).ok());
  ASSERT_TRUE(release(sid, {20, 21, 25}, {}).ok());
  for (uint64_t id : {20, 25}) {
    grpc::Status gone = realize(sid, {op(26, v1::NEG, {id})}, {26}, &resp);
    EXPECT_NE(gone.error_message().find("is not defined in this session"), std::string::npos) << gone.error_message();
  }
  EXPECT_TRUE(close_session(sid).ok());
}

TEST_F(ServerTest, MalformedNodesNameIdAndOp) {
  const std::string sid = create_session();
  v1::RealizeResponse resp;
  ASSERT_TRUE(realize(sid, {float_const(1, 1.0, {2})}, {1}, &resp).ok());

  grpc::Status s = realize(sid, {float_const(1, 2.0, {2})}, {1}, &resp);  // duplicate id
  EXPECT_CODE(s, INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("node 1 (CONST)"), std::string::npos) << s.error_message();

  v1::Node bad_arg = op(2, v1::RESHAPE, {1});
  bad_arg.mutable_axes()->add_axes(0);
  s = realize(sid, {bad_arg}, {2}, &resp);
  EXPECT_CODE(s, INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("node 2 (RESHAPE): expects arg shape"), std::string::npos) << s.error_message();

  v1::Node unknown = op(3, static_cast<v1::Op>(999), {1});
  s = realize(sid, {unknown}, {3}, &resp);
  EXPECT_CODE(s, INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("node 3: unknown op 999"), std::string::npos) << s.error_message();

  s = realize(sid, {op(4, v1::NEG, {1, 1})}, {4}, &resp);  // arity
  EXPECT_CODE(s, INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("node 4 (NEG)"), std::string::npos) << s.error_message();

  s = realize(sid, {inline_buffer(5, v1::FLOAT32, {3}, std::string(8, '\0'))}, {5}, &resp);  // size mismatch
  EXPECT_CODE(s, INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("node 5 (BUFFER)"), std::string::npos) << s.error_message();

  s = realize(sid, {}, {12345}, &resp);
  EXPECT_CODE(s, INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("12345"), std::string::npos) << s.error_message();
  EXPECT_TRUE(close_session(sid).ok());
}

TEST_F(ServerTest, DTypeMismatches) {
  const std::string sid = create_session();
  v1::RealizeResponse resp;
  // Stated dtype differs from the derived one.
  grpc::Status s = realize(sid, {float_const(1, 1.0, {2}), op(2, v1::ADD, {1, 1}, v1::INT32)}, {2}, &resp);
  EXPECT_CODE(s, INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("node 2 (ADD)"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("INT32"), std::string::npos) << s.error_message();
  // Sources of different dtypes (core's own check), still named by node.
  v1::Node i = float_const(4, 1.0, {2}, v1::INT32);
  s = realize(sid, {float_const(3, 1.0, {2}), i, op(5, v1::ADD, {3, 4})}, {5}, &resp);
  EXPECT_CODE(s, INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("node 5 (ADD)"), std::string::npos) << s.error_message();
  EXPECT_TRUE(close_session(sid).ok());
}

TEST_F(ServerTest, LimitsAreResourceExhaustedNamingTheLimit) {
  const std::string sid = create_session();
  v1::RealizeResponse resp;
  grpc::Status s = realize(sid, {float_const(1, 1.0, std::vector<int64_t>(17, 1))}, {1}, &resp);
  EXPECT_CODE(s, RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("max_rank (16)"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("node 1 (CONST)"), std::string::npos) << s.error_message();

  s = realize(sid, {float_const(2, 1.0, {1 << 20, 1 << 12})}, {2}, &resp);
  EXPECT_CODE(s, RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("max_elements"), std::string::npos) << s.error_message();

  const size_t too_many = (1u << 20) / 4 + 1;
  s = realize(sid, {inline_buffer(3, v1::FLOAT32, {static_cast<int64_t>(too_many)}, std::string(too_many * 4, '\0'))},
              {3}, &resp);
  EXPECT_CODE(s, RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("max_inline_bytes"), std::string::npos) << s.error_message();
  EXPECT_TRUE(close_session(sid).ok());
}

// A 0-d inline BUFFER is 0-d (it came back as [1] in an outside report): so is what is computed
// from it, it adds to a 0-d CONST, and a bitcast to another itemsize is refused as for any 0-d.
TEST_F(ServerTest, ZeroDimensionalInlineBufferKeepsItsShape) {
  const std::string sid = create_session();
  v1::RealizeResponse resp;
  ASSERT_TRUE(realize(sid, {inline_buffer(1, v1::FLOAT32, {}, bytes_of(std::vector<float>{2.5f}))}, {1}, &resp).ok());
  EXPECT_EQ(resp.results(0).shape_size(), 0);
  ASSERT_TRUE(realize(sid, {op(2, v1::NEG, {1})}, {2}, &resp).ok());
  EXPECT_EQ(resp.results(0).shape_size(), 0);
  grpc::Status s = realize(sid, {float_const(3, 1.0, {}), op(4, v1::ADD, {1, 3})}, {4}, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.results(0).shape_size(), 0);
  EXPECT_EQ(values_of<float>(resp.results(0).data()), std::vector<float>{3.5f});
  s = realize(sid, {op(5, v1::BITCAST, {1}, v1::INT16)}, {5}, &resp);
  EXPECT_CODE(s, INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("0-d"), std::string::npos) << s.error_message();
  EXPECT_TRUE(close_session(sid).ok());
}

TEST_F(ServerTest, HandlesBelongToOneSession) {
  const std::string a = create_session();
  const std::string b = create_session();
  v1::RealizeResponse resp;
  ASSERT_TRUE(realize(a, {float_const(1, 3.0, {2}), op(2, v1::NEG, {1})}, {2}, &resp).ok());
  const uint64_t h = resp.results(0).handle();

  grpc::Status s = realize(a, {handle_buffer(3, h + 1000)}, {3}, &resp);
  EXPECT_CODE(s, NOT_FOUND);
  EXPECT_NE(s.error_message().find(std::to_string(h + 1000)), std::string::npos) << s.error_message();

  s = realize(b, {handle_buffer(3, h)}, {3}, &resp);
  EXPECT_CODE(s, NOT_FOUND);
  std::string data;
  EXPECT_CODE(download(b, h, 0, &data), NOT_FOUND);
  EXPECT_TRUE(download(a, h, 0, &data).ok());
  EXPECT_TRUE(close_session(a).ok());
  EXPECT_TRUE(close_session(b).ok());
}

TEST_F(ServerTest, ReleaseThenUseFails) {
  const std::string sid = create_session();
  v1::RealizeResponse resp;
  ASSERT_TRUE(realize(sid, {float_const(1, 3.0, {4}), op(2, v1::SQRT, {1})}, {2}, &resp).ok());
  const uint64_t h = resp.results(0).handle();
  ASSERT_TRUE(release(sid, {2}, {}).ok());
  grpc::Status s = realize(sid, {op(3, v1::NEG, {2})}, {3}, &resp);
  EXPECT_CODE(s, INVALID_ARGUMENT);
  std::string data;
  EXPECT_CODE(download(sid, h, 0, &data), NOT_FOUND);
  EXPECT_CODE(release(sid, {2}, {}), NOT_FOUND);
  EXPECT_CODE(release(sid, {}, {h}), NOT_FOUND);
  // release_nodes piggy-backed on a realize: node 1 goes after the realize.
  v1::RealizeRequest req;
  req.set_session_id(sid);
  *req.add_nodes() = op(4, v1::NEG, {1});
  req.add_outputs(4);
  req.add_release_nodes(1);
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->Realize(&ctx, req, &resp).ok());
  EXPECT_CODE(realize(sid, {op(5, v1::NEG, {1})}, {5}, &resp), INVALID_ARGUMENT);
  EXPECT_TRUE(close_session(sid).ok());
}

// A node released while a lazy node built on it is still unrealized: the later realize finds the
// data (an inline leaf, a leaf released by release_nodes, a realized node, an uploaded handle), and
// the released buffer goes once nothing unrealized reads it.
TEST_F(ServerTest, ReleasedSourceStaysForTheLazyNodesBuiltOnIt) {
  const std::string sid = create_session();
  absl::StatusOr<std::shared_ptr<Session>> session = SharedServer::server().sessions().find(sid, "");
  ASSERT_TRUE(session.ok());
  const std::vector<float> x = {1, 2, 3, 4};
  const auto expect_neg = [&](uint64_t id, const std::vector<float>& want) {
    v1::RealizeResponse resp;
    grpc::Status s = realize(sid, {}, {id}, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    std::vector<float> got = values_of<float>(resp.results(0).data());
    for (float& v : got) v = -v;
    EXPECT_EQ(got, want);
  };
  v1::RealizeResponse resp;
  // Inline leaf, released by Release.
  ASSERT_TRUE(realize(sid, {inline_buffer(1, v1::FLOAT32, {4}, bytes_of(x)), op(2, v1::NEG, {1})}, {}, &resp).ok());
  ASSERT_TRUE(release(sid, {1}, {}).ok());
  EXPECT_EQ((*session)->held_buffers(), 1u);  // node 2 still reads it
  expect_neg(2, x);
  EXPECT_EQ((*session)->held_buffers(), 1u);  // the result; the leaf went with its last reader
  // Inline leaf, released by release_nodes of the request that defined its reader.
  {
    v1::RealizeRequest req;
    req.set_session_id(sid);
    *req.add_nodes() = inline_buffer(3, v1::FLOAT32, {4}, bytes_of(x));
    *req.add_nodes() = op(4, v1::NEG, {3});
    req.add_release_nodes(3);
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->Realize(&ctx, req, &resp).ok());
  }
  expect_neg(4, x);
  // A realized node as the source.
  ASSERT_TRUE(realize(sid, {float_const(5, 9.0, {4}), op(6, v1::SQRT, {5})}, {6}, &resp).ok());
  ASSERT_TRUE(realize(sid, {op(7, v1::NEG, {6})}, {}, &resp).ok());
  ASSERT_TRUE(release(sid, {6}, {}).ok());
  expect_neg(7, {3, 3, 3, 3});
  // An uploaded handle, released with the node that referred to it.
  v1::UploadResponse up;
  ASSERT_TRUE(upload(sid, v1::FLOAT32, {4}, bytes_of(x), 16, &up).ok());
  ASSERT_TRUE(realize(sid, {handle_buffer(8, up.handle()), op(9, v1::NEG, {8})}, {}, &resp).ok());
  ASSERT_TRUE(release(sid, {8}, {up.handle()}).ok());
  expect_neg(9, x);
  // Released before its reader was realized, then the reader released: nothing is left held.
  ASSERT_TRUE(realize(sid, {inline_buffer(10, v1::FLOAT32, {4}, bytes_of(x)), op(11, v1::NEG, {10})}, {}, &resp).ok());
  ASSERT_TRUE(release(sid, {10}, {}).ok());
  ASSERT_TRUE(release(sid, {2, 4, 5, 7, 9, 11}, {}).ok());
  EXPECT_EQ((*session)->held_buffers(), 0u);
  EXPECT_EQ((*session)->held_bytes(), 0u);
  EXPECT_TRUE(close_session(sid).ok());
}

TEST_F(ServerTest, UploadErrors) {
  const std::string sid = create_session();
  v1::UploadResponse up;
  EXPECT_CODE(upload(sid, v1::FLOAT32, {4}, std::string(12, 'x'), 8, &up), INVALID_ARGUMENT);  // short
  EXPECT_CODE(upload(sid, v1::FLOAT32, {4}, std::string(20, 'x'), 8, &up), INVALID_ARGUMENT);  // long
  EXPECT_CODE(upload("nope", v1::FLOAT32, {4}, std::string(16, 'x'), 8, &up), NOT_FOUND);
  EXPECT_CODE(upload(sid, v1::FLOAT32, std::vector<int64_t>(17, 1), std::string(4, 'x'), 8, &up), RESOURCE_EXHAUSTED);
  // A dtype number this daemon does not know is named as such, not taken for a missing one.
  grpc::Status unknown = upload(sid, static_cast<v1::DType>(99), {4}, std::string(16, 'x'), 8, &up);
  EXPECT_CODE(unknown, INVALID_ARGUMENT);
  EXPECT_NE(unknown.error_message().find("unknown dtype 99"), std::string::npos) << unknown.error_message();
  EXPECT_TRUE(close_session(sid).ok());
}

// ---- lifecycle ------------------------------------------------------------------------------

TEST_F(ServerTest, CloseSessionFreesBuffers) {
  ASSERT_TRUE(eventually([] { return SharedServer::server().sessions().live() == 0; }));
  const int64_t baseline = Buffer::live_count();
  const std::string sid = create_session();
  v1::UploadResponse up;
  ASSERT_TRUE(upload(sid, v1::FLOAT32, {1024}, std::string(4096, '\1'), 1000, &up).ok());
  v1::RealizeResponse resp;
  ASSERT_TRUE(realize(sid, {handle_buffer(1, up.handle()), op(2, v1::NEG, {1})}, {2}, &resp).ok());
  EXPECT_GT(Buffer::live_count(), baseline);
  ASSERT_TRUE(close_session(sid).ok());
  EXPECT_EQ(Buffer::live_count(), baseline);
  EXPECT_CODE(realize(sid, {float_const(3, 1.0, {1})}, {3}, &resp), NOT_FOUND);
  EXPECT_CODE(close_session(sid), NOT_FOUND);
}

TEST_F(ServerTest, ExecuteStream) {
  ASSERT_TRUE(eventually([] { return SharedServer::server().sessions().live() == 0; }));
  const int64_t baseline = Buffer::live_count();
  grpc::ClientContext ctx;
  auto stream = stub_->Execute(&ctx);
  v1::ExecuteRequest req;
  v1::ExecuteResponse resp;

  // A command before open fails, and the stream stays usable.
  req.set_request_id(1);
  req.mutable_release();
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->Read(&resp));
  EXPECT_EQ(resp.request_id(), 1u);
  ASSERT_TRUE(resp.has_error());
  EXPECT_EQ(resp.error().code(), static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION));

  req.Clear();
  req.set_request_id(2);
  req.mutable_open();
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->Read(&resp));
  ASSERT_TRUE(resp.has_opened()) << resp.DebugString();
  const std::string sid = resp.opened().session_id();
  EXPECT_EQ(SharedServer::server().sessions().live(), 1u);

  // Upload in two chunks.
  const std::vector<float> x = iota_floats(1000);
  const std::string bytes = bytes_of(x);
  for (int part = 0; part < 2; ++part) {
    req.Clear();
    req.set_request_id(3);
    v1::UploadChunk* c = req.mutable_upload();
    c->set_upload_id(77);
    if (part == 0) {
      c->mutable_header()->set_dtype(v1::FLOAT32);
      c->mutable_header()->add_shape(1000);
    }
    c->set_data(bytes.substr(part * 2000, 2000));
    c->set_last(part == 1);
    ASSERT_TRUE(stream->Write(req));
  }
  ASSERT_TRUE(stream->Read(&resp));
  EXPECT_EQ(resp.request_id(), 3u);
  ASSERT_TRUE(resp.has_uploaded()) << resp.DebugString();
  const uint64_t handle = resp.uploaded().handle();

  // Realize on the uploaded handle.
  req.Clear();
  req.set_request_id(4);
  v1::RealizeRequest* r = req.mutable_realize();
  *r->add_nodes() = handle_buffer(1, handle);
  *r->add_nodes() = reduce(2, v1::REDUCE_SUM, 1, {0});
  r->add_outputs(2);
  r->set_want_data(true);
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->Read(&resp));
  EXPECT_EQ(resp.request_id(), 4u);
  ASSERT_TRUE(resp.has_realized()) << resp.DebugString();
  std::vector<float> sum = values_of<float>(resp.realized().results(0).data());
  ASSERT_EQ(sum.size(), 1u);
  EXPECT_FLOAT_EQ(sum[0], 500500.0f);

  // A failing command answers with an error and the stream goes on.
  req.Clear();
  req.set_request_id(5);
  *req.mutable_realize()->add_nodes() = op(3, v1::ADD, {1, 42});
  req.mutable_realize()->add_outputs(3);
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->Read(&resp));
  EXPECT_EQ(resp.request_id(), 5u);
  ASSERT_TRUE(resp.has_error());
  EXPECT_EQ(resp.error().code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_NE(resp.error().message().find("node 3 (ADD)"), std::string::npos) << resp.error().message();

  // Download asking for tiny chunks, all answering request 6: chunks are at least 64 KiB, so
  // these 4,000 bytes come in one.
  req.Clear();
  req.set_request_id(6);
  req.mutable_download()->set_handle(handle);
  req.mutable_download()->set_chunk_bytes(1500);
  ASSERT_TRUE(stream->Write(req));
  std::string back;
  int pieces = 0;
  do {
    ASSERT_TRUE(stream->Read(&resp));
    EXPECT_EQ(resp.request_id(), 6u);
    ASSERT_TRUE(resp.has_chunk()) << resp.DebugString();
    EXPECT_EQ(resp.chunk().offset(), back.size());
    back += resp.chunk().data();
    ++pieces;
  } while (!resp.chunk().last());
  EXPECT_EQ(pieces, 1);
  EXPECT_TRUE(back == bytes);
  EXPECT_GT(Buffer::live_count(), baseline);

  // Dropping the stream closes the session it opened and frees its buffers.
  ctx.TryCancel();
  stream->Finish();
  EXPECT_TRUE(eventually([] { return SharedServer::server().sessions().live() == 0; }));
  EXPECT_TRUE(eventually([&] { return Buffer::live_count() == baseline; }))
      << Buffer::live_count() << " live buffers, baseline " << baseline;
  EXPECT_CODE(close_session(sid), NOT_FOUND);
}

TEST_F(ServerTest, ExecuteAttachLeavesSessionOpen) {
  const std::string sid = create_session();
  {
    grpc::ClientContext ctx;
    auto stream = stub_->Execute(&ctx);
    v1::ExecuteRequest req;
    req.set_request_id(1);
    req.mutable_open()->set_attach_session_id(sid);
    ASSERT_TRUE(stream->Write(req));
    v1::ExecuteResponse resp;
    ASSERT_TRUE(stream->Read(&resp));
    ASSERT_TRUE(resp.has_opened());
    EXPECT_EQ(resp.opened().session_id(), sid);
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
  }
  EXPECT_TRUE(close_session(sid).ok());  // still there: the stream only attached

  // Closing through the stream.
  grpc::ClientContext ctx;
  auto stream = stub_->Execute(&ctx);
  v1::ExecuteRequest req;
  v1::ExecuteResponse resp;
  req.set_request_id(1);
  req.mutable_open();
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->Read(&resp));
  const std::string owned = resp.opened().session_id();
  req.Clear();
  req.set_request_id(2);
  req.mutable_close();
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->Read(&resp));
  EXPECT_TRUE(resp.has_closed()) << resp.DebugString();
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_CODE(close_session(owned), NOT_FOUND);
}

// Bytes that are not a protobuf message: INVALID_ARGUMENT naming the method (gRPC alone answers
// UNIMPLEMENTED with no message), and the daemon goes on serving.
TEST_F(ServerTest, UndecodableRequestIsInvalidArgument) {
  grpc::GenericStub generic(grpc::CreateChannel(SharedServer::server().tcp_address(), grpc::InsecureChannelCredentials()));
  for (const char* method : {"/polygrad.v1.Polygrad/Realize", "/polygrad.v1.Polygrad/GetInfo"}) {
    grpc::Slice slice(std::string("\xff\xff\xff\xff", 4));
    grpc::ByteBuffer req(&slice, 1), resp;
    grpc::ClientContext ctx;
    std::promise<grpc::Status> done;
    generic.UnaryCall(&ctx, method, grpc::StubOptions(), &req, &resp, [&](grpc::Status s) { done.set_value(s); });
    grpc::Status s = done.get_future().get();
    EXPECT_CODE(s, INVALID_ARGUMENT);
    EXPECT_EQ(s.error_message(), std::string("the request to ") + method + " could not be parsed as its protobuf message");
  }
  const std::string sid = create_session();
  EXPECT_TRUE(close_session(sid).ok());
}

TEST_F(ServerTest, HealthIsServing) {
  grpc::GenericStub generic(grpc::CreateChannel(SharedServer::server().tcp_address(), grpc::InsecureChannelCredentials()));
  for (std::string service : {std::string(), std::string("polygrad.v1.Polygrad")}) {
    // HealthCheckRequest{service = 1}, encoded by hand: no health stubs are packaged.
    std::string request;
    if (!service.empty()) request = std::string("\x0a", 1) + static_cast<char>(service.size()) + service;
    grpc::Slice slice(request);
    grpc::ByteBuffer req(&slice, 1);
    grpc::ByteBuffer resp;
    grpc::ClientContext ctx;
    std::promise<grpc::Status> done;
    generic.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &req, &resp,
                      [&](grpc::Status s) { done.set_value(s); });
    grpc::Status s = done.get_future().get();
    ASSERT_TRUE(s.ok()) << s.error_message();
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(resp.Dump(&slices).ok());
    std::string bytes;
    for (const auto& sl : slices) bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
    EXPECT_EQ(bytes, std::string("\x08\x01", 2)) << "status is not SERVING for \"" << service << "\"";
  }
}

TEST_F(ServerTest, UnixSocketServes) {
  auto stub = make_stub("unix:" + SharedServer::server().unix_socket());
  grpc::ClientContext ctx;
  v1::ServerInfo info;
  grpc::Status s = stub->GetInfo(&ctx, v1::GetInfoRequest(), &info);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(info.version(), std::string(version()));
}

std::string http_get(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return {};
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[4096];
      ssize_t n;
      while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return out;
}

TEST_F(ServerTest, ConcurrentSessions) {
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      auto stub = make_stub(SharedServer::server().tcp_address());
      grpc::ClientContext c1;
      v1::CreateSessionResponse created;
      if (!stub->CreateSession(&c1, v1::CreateSessionRequest(), &created).ok()) return;
      v1::RealizeRequest req;
      req.set_session_id(created.session_id());
      *req.add_nodes() = float_const(1, static_cast<double>(t), {16});
      *req.add_nodes() = reduce(2, v1::REDUCE_SUM, 1, {0});
      req.add_outputs(2);
      req.set_want_data(true);
      v1::RealizeResponse resp;
      grpc::ClientContext c2;
      if (stub->Realize(&c2, req, &resp).ok() && values_of<float>(resp.results(0).data()) == std::vector<float>{16.0f * t}) {
        ok.fetch_add(1);
      }
      grpc::ClientContext c3;
      v1::CloseSessionRequest close;
      close.set_session_id(created.session_id());
      v1::CloseSessionResponse closed;
      (void)stub->CloseSession(&c3, close, &closed);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 8);
}

// Servers of their own (no metrics endpoint) for limits that shape the whole daemon.
class OwnServerTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = make_temp_dir(); }
  void TearDown() override {
    stop_server(server_, nullptr);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void start(ServerOptions o) {
    absl::StatusOr<std::unique_ptr<Server>> s = Server::start(std::move(o));
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
    stub_ = make_stub(server_->tcp_address());
  }
  grpc::Status create(std::string* id) {
    grpc::ClientContext ctx;
    v1::CreateSessionResponse resp;
    grpc::Status s = stub_->CreateSession(&ctx, v1::CreateSessionRequest(), &resp);
    *id = resp.session_id();
    return s;
  }
  fs::path dir_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<v1::Polygrad::Stub> stub_;
};

TEST_F(OwnServerTest, MaxSessions) {
  ServerOptions o = test_options(dir_, nullptr);
  o.limits.max_sessions = 2;
  start(std::move(o));
  std::string a, b, c;
  ASSERT_TRUE(create(&a).ok());
  ASSERT_TRUE(create(&b).ok());
  grpc::Status s = create(&c);
  EXPECT_CODE(s, RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("max_sessions (2)"), std::string::npos) << s.error_message();
}

TEST_F(OwnServerTest, IdleSessionsExpire) {
  ServerOptions o = test_options(dir_, nullptr);
  o.session_idle_timeout = std::chrono::seconds(1);
  o.reaper_interval = std::chrono::milliseconds(50);
  start(std::move(o));
  const int64_t baseline = Buffer::live_count();

  // A session held by a live Execute stream does not idle out. It is opened first, so when the
  // plain session below has idled out, this one has been idle longer: no sleep is needed to
  // show that the reaper passed it over.
  grpc::ClientContext stream_ctx;
  auto stream = stub_->Execute(&stream_ctx);
  v1::ExecuteRequest req;
  v1::ExecuteResponse resp;
  req.set_request_id(1);
  req.mutable_open();
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->Read(&resp));
  ASSERT_TRUE(resp.has_opened());

  std::string id;
  ASSERT_TRUE(create(&id).ok());
  grpc::ClientContext ctx;
  v1::UploadResponse up;
  auto writer = stub_->Upload(&ctx, &up);
  v1::UploadChunk chunk;
  chunk.mutable_header()->set_session_id(id);
  chunk.mutable_header()->set_dtype(v1::UINT8);
  chunk.mutable_header()->add_shape(3);
  chunk.set_data("abc");
  ASSERT_TRUE(writer->Write(chunk));
  writer->WritesDone();
  ASSERT_TRUE(writer->Finish().ok());
  EXPECT_GT(Buffer::live_count(), baseline);

  EXPECT_TRUE(eventually([&] { return server_->sessions().live() == 1; }));
  // The reaper takes the session out of the table first, then closes it (its buffers go): the
  // count is read once that has happened, not in between.
  EXPECT_TRUE(eventually([&] { return Buffer::live_count() == baseline; })) << Buffer::live_count();
  req.set_request_id(2);
  req.mutable_release();
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->Read(&resp));
  EXPECT_TRUE(resp.has_released()) << resp.DebugString();
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_TRUE(eventually([&] { return server_->sessions().live() == 0; }));
  grpc::ClientContext ctx2;
  v1::ReleaseRequest rel;
  rel.set_session_id(id);
  v1::ReleaseResponse rr;
  EXPECT_CODE(stub_->Release(&ctx2, rel, &rr), NOT_FOUND);
}

TEST_F(OwnServerTest, RefusesNonLoopbackWithoutFlag) {
  ServerOptions o = test_options(dir_, nullptr);
  o.listen = "0.0.0.0:0";
  absl::StatusOr<std::unique_ptr<Server>> s = Server::start(std::move(o));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("loopback"), absl::string_view::npos) << s.status();
}

TEST_F(OwnServerTest, GracefulShutdownStopsServing) {
  start(test_options(dir_, nullptr));
  std::string id;
  ASSERT_TRUE(create(&id).ok());
  server_->shutdown(std::chrono::milliseconds(200));
  EXPECT_EQ(server_->sessions().live(), 0u);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  v1::ServerInfo info;
  EXPECT_FALSE(stub_->GetInfo(&ctx, v1::GetInfoRequest(), &info).ok());
}


TEST_F(OwnServerTest, MetricsEndpoint) {
  ServerOptions o = test_options(dir_, nullptr);
  o.metrics_listen = "127.0.0.1:0";  // the one Exposer of this binary
  start(std::move(o));
  // Make sure at least one realize (and so one kernel-cache lookup) happened.
  std::string sid;
  ASSERT_TRUE(create(&sid).ok());
  v1::RealizeRequest req;
  req.set_session_id(sid);
  *req.add_nodes() = float_const(1, 2.0, {8});
  *req.add_nodes() = op(2, v1::EXP2, {1});
  req.add_outputs(2);
  v1::RealizeResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->Realize(&ctx, req, &resp).ok());

  const int port = server_->metrics_port();
  ASSERT_GT(port, 0);
  const std::string text = http_get(port, "/metrics");
  ASSERT_NE(text.find("200 OK"), std::string::npos) << text.substr(0, 200);
  // A non-zero OK count for CreateSession.
  const std::string series = "polygradd_requests_total{code=\"OK\",method=\"CreateSession\"} ";
  size_t at = text.find(series);
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_GT(std::stod(text.substr(at + series.size())), 0.0);
  for (const char* name : {"polygradd_kernel_cache_lookups_total{result=\"miss\"}",
                           "polygradd_kernel_cache_lookups_total{result=\"memory_hit\"}",
                           "polygradd_request_duration_seconds_bucket",
                           "polygradd_queue_duration_seconds_bucket{method=\"Realize\"", "polygradd_sessions ",
                           "polygradd_sessions_created_total ", "polygradd_buffers ", "polygradd_buffer_bytes ",
                           "polygradd_transfer_bytes_total{direction=\"upload\"}", "polygradd_build_info{version=",
                           "polygradd_compile_duration_seconds", "polygradd_kernel_duration_seconds",
                           "polygradd_kernel_builds_total{tier=\"quick\"}",
                           "polygradd_kernel_builds_total{tier=\"optimized\"}",
                           "polygradd_kernel_background_build_failures_total ",
                           "polygradd_kernel_build_failures_total{tier=\"quick\"}",
                           "polygradd_kernel_quick_launches_total ", "polygradd_kernel_background_builds ",
                           // Every pass of the realize above (core/engine/pipeline.h), by name.
                           "polygradd_compile_pass_duration_seconds_count{pass=\"schedule_cache\"}",
                           "polygradd_compile_pass_duration_seconds_count{pass=\"schedule\"}",
                           "polygradd_compile_pass_duration_seconds_count{pass=\"lower\"}",
                           "polygradd_compile_pass_duration_seconds_count{pass=\"simplify\"}",
                           "polygradd_compile_pass_duration_seconds_count{pass=\"optimize\"}",
                           "polygradd_compile_pass_duration_seconds_count{pass=\"linearize\"}",
                           "polygradd_compile_pass_duration_seconds_count{pass=\"render\"}",
                           "polygradd_compile_pass_duration_seconds_count{pass=\"compile\"}",
                           "polygradd_compile_pass_duration_seconds_count{pass=\"run\"}"}) {
    EXPECT_NE(text.find(name), std::string::npos) << "missing " << name;
  }
  // Where the C library reports its heap, the heap holds at least the live buffers.
  if (heap_bytes_in_use().has_value()) {
    EXPECT_GE(series_in(text, "polygradd_heap_bytes", -1), series_in(text, "polygradd_buffer_bytes"));
  } else {
    EXPECT_EQ(text.find("polygradd_heap_bytes"), std::string::npos);
  }
  // The in-process rendering carries the same families.
  const std::string rendered = server_->metrics().render();
  EXPECT_NE(rendered.find("polygradd_kernel_cache_lookups_total"), std::string::npos);
}

}  // namespace
}  // namespace polygrad::server
