// Compiled steps over the wire: CompileStep / RunStep / ReleaseStep against an in-process daemon.
// Ownership, errors naming what is wrong, in-place updates visible to Realize and Download, and
// no buffer left behind when a session with steps closes.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>

#include <gtest/gtest.h>

#include "core/runtime/buffer.h"
#include "server/server.h"
#include "test_util.h"

namespace polygrad::server {
namespace {

using namespace polygrad::server::testing;  // NOLINT
namespace fs = std::filesystem;

class StepTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string tmpl = (fs::temp_directory_path() / "polygrad-step-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.unix_socket.clear();
    o.metrics_listen.clear();
    o.cache_dir = dir_ / "cache";
    o.log_sink = [](std::string_view) {};
    auto s = Server::start(std::move(o));
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = s->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void SetUp() override { stub_ = make_stub(server_->tcp_address()); }

  std::string create_session() { return testing::create_session(*stub_); }
  grpc::Status close_session(const std::string& id) { return testing::close_session(*stub_, id); }
  grpc::Status realize(const std::string& sid, std::vector<v1::Node> nodes, std::vector<uint64_t> outputs,
                       v1::RealizeResponse* resp) {
    grpc::ClientContext ctx;
    v1::RealizeRequest req;
    req.set_session_id(sid);
    for (v1::Node& n : nodes) *req.add_nodes() = std::move(n);
    for (uint64_t o : outputs) req.add_outputs(o);
    req.set_want_data(true);
    return stub_->Realize(&ctx, req, resp);
  }
  std::vector<float> value(const std::string& sid, uint64_t node) {
    v1::RealizeResponse resp;
    grpc::Status s = realize(sid, {}, {node}, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return s.ok() ? values_of<float>(resp.results(0).data()) : std::vector<float>{};
  }
  grpc::Status compile(const std::string& sid, std::vector<v1::Node> nodes, std::vector<uint64_t> inputs,
                       std::vector<uint64_t> outputs, std::vector<std::pair<uint64_t, uint64_t>> assigns,
                       v1::CompileStepResponse* resp) {
    grpc::ClientContext ctx;
    v1::CompileStepRequest req;
    req.set_session_id(sid);
    for (v1::Node& n : nodes) *req.add_nodes() = std::move(n);
    for (uint64_t i : inputs) req.add_inputs(i);
    for (uint64_t o : outputs) req.add_outputs(o);
    for (auto [t, v] : assigns) {
      v1::StepAssign* a = req.add_assigns();
      a->set_target_node(t);
      a->set_value(v);
    }
    return stub_->CompileStep(&ctx, req, resp);
  }
  grpc::Status run(const std::string& sid, uint64_t step, std::vector<v1::StepInput> inputs, v1::RunStepResponse* resp) {
    grpc::ClientContext ctx;
    v1::RunStepRequest req;
    req.set_session_id(sid);
    req.set_step_id(step);
    for (v1::StepInput& in : inputs) *req.add_inputs() = std::move(in);
    req.set_want_data(true);
    return stub_->RunStep(&ctx, req, resp);
  }
  grpc::Status release_step(const std::string& sid, uint64_t step) {
    grpc::ClientContext ctx;
    v1::ReleaseStepRequest req;
    req.set_session_id(sid);
    req.set_step_id(step);
    v1::ReleaseStepResponse resp;
    return stub_->ReleaseStep(&ctx, req, &resp);
  }
  static v1::StepInput data_input(uint64_t node, const std::vector<float>& v) {
    v1::StepInput in;
    in.set_node_id(node);
    in.set_data(bytes_of(v));
    return in;
  }

  // w (node 1) and x (node 2, the per-run input), realized; the step computes w - 0.5 * x into
  // w and returns sum(w - 0.5 * x).
  uint64_t sgd_like_step(const std::string& sid) {
    v1::RealizeResponse r;
    EXPECT_TRUE(realize(sid, {inline_buffer(1, v1::FLOAT32, {3}, bytes_of(std::vector<float>{1, 2, 3})),
                              inline_buffer(2, v1::FLOAT32, {3}, bytes_of(std::vector<float>{0, 0, 0}))},
                        {1, 2}, &r)
                    .ok());
    v1::CompileStepResponse c;
    grpc::Status s = compile(sid, {float_const(3, 0.5, {3}), op(4, v1::MUL, {2, 3}), op(5, v1::SUB, {1, 4}),
                                   reduce(6, v1::REDUCE_SUM, 5, {0})},
                             {2}, {6}, {{1, 5}}, &c);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_GE(c.stats().kernels(), 1u);
    return c.step_id();
  }

  static inline Server* server_ = nullptr;
  static inline fs::path dir_;
  std::unique_ptr<v1::Polygrad::Stub> stub_;
};

TEST_F(StepTest, RunUpdatesTargetInPlaceForRealizeAndDownload) {
  const std::string sid = create_session();
  const uint64_t step = sgd_like_step(sid);
  // -w realized before any run: an equal graph sent after the run must see the new w.
  ASSERT_EQ(value(sid, 2), (std::vector<float>{0, 0, 0}));
  v1::RealizeResponse neg;
  ASSERT_TRUE(realize(sid, {op(7, v1::NEG, {1})}, {7}, &neg).ok());
  EXPECT_EQ(values_of<float>(neg.results(0).data()), (std::vector<float>{-1, -2, -3}));

  v1::RunStepResponse out;
  ASSERT_TRUE(run(sid, step, {data_input(2, {2, 2, 2})}, &out).ok());
  ASSERT_EQ(out.outputs_size(), 1);
  EXPECT_EQ(out.outputs(0).node_id(), 6u);
  EXPECT_EQ(values_of<float>(out.outputs(0).data()), (std::vector<float>{3}));
  EXPECT_EQ(value(sid, 1), (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(value(sid, 2), (std::vector<float>{2, 2, 2}));  // the input node holds the fed data
  v1::RealizeResponse neg2;
  ASSERT_TRUE(realize(sid, {op(8, v1::NEG, {1})}, {8}, &neg2).ok());
  EXPECT_EQ(values_of<float>(neg2.results(0).data()), (std::vector<float>{0, -1, -2}));
  EXPECT_EQ(value(sid, 7), (std::vector<float>{-1, -2, -3}));  // a result realized earlier keeps its value

  // Download by w's handle sees the new values too.
  v1::RealizeResponse w;
  ASSERT_TRUE(realize(sid, {}, {1}, &w).ok());
  grpc::ClientContext dctx;
  v1::DownloadRequest dreq;
  dreq.set_session_id(sid);
  dreq.set_handle(w.results(0).handle());
  auto reader = stub_->Download(&dctx, dreq);
  v1::DownloadChunk chunk;
  std::string bytes;
  while (reader->Read(&chunk)) bytes += chunk.data();
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(values_of<float>(bytes), (std::vector<float>{0, 1, 2}));

  // No new data: the input keeps its last value.
  ASSERT_TRUE(run(sid, step, {}, &out).ok());
  EXPECT_EQ(values_of<float>(out.outputs(0).data()), (std::vector<float>{0}));
  EXPECT_EQ(value(sid, 1), (std::vector<float>{-1, 0, 1}));

  // Input by handle.
  v1::RealizeResponse h;
  ASSERT_TRUE(realize(sid, {inline_buffer(20, v1::FLOAT32, {3}, bytes_of(std::vector<float>{0, 0, 4}))}, {20}, &h).ok());
  v1::StepInput by_handle;
  by_handle.set_node_id(2);
  by_handle.set_handle(h.results(0).handle());
  ASSERT_TRUE(run(sid, step, {by_handle}, &out).ok());
  EXPECT_EQ(value(sid, 1), (std::vector<float>{-1, 0, -1}));
  ASSERT_TRUE(close_session(sid).ok());
}

TEST_F(StepTest, StepsBelongToTheirSession) {
  const std::string a = create_session(), b = create_session();
  const uint64_t step = sgd_like_step(a);
  v1::RunStepResponse out;
  EXPECT_CODE(run(b, step, {}, &out), NOT_FOUND);
  EXPECT_CODE(release_step(b, step), NOT_FOUND);
  ASSERT_TRUE(run(a, step, {}, &out).ok());
  ASSERT_TRUE(release_step(a, step).ok());
  grpc::Status s = run(a, step, {}, &out);
  EXPECT_CODE(s, NOT_FOUND);
  EXPECT_NE(s.error_message().find("step"), std::string::npos);
  EXPECT_CODE(release_step(a, step), NOT_FOUND);
  ASSERT_TRUE(close_session(a).ok());
  ASSERT_TRUE(close_session(b).ok());
}

TEST_F(StepTest, BadRequestsNameWhatIsWrongAndSessionStaysUsable) {
  const std::string sid = create_session();
  const uint64_t step = sgd_like_step(sid);
  v1::CompileStepResponse c;
  // An input that has no buffer.
  grpc::Status s = compile(sid, {op(30, v1::NEG, {1})}, {30}, {30}, {}, &c);
  EXPECT_CODE(s, INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("input node 30"), std::string::npos) << s.error_message();
  // A value of the wrong shape.
  s = compile(sid, {reduce(31, v1::REDUCE_SUM, 1, {0})}, {}, {}, {{1, 31}}, &c);
  EXPECT_CODE(s, INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("assign 0"), std::string::npos) << s.error_message();
  // An unknown output or materialized node; an input that is also a target.
  EXPECT_CODE(compile(sid, {}, {}, {999}, {}, &c), INVALID_ARGUMENT);
  {
    grpc::ClientContext ctx;
    v1::CompileStepRequest req;
    req.set_session_id(sid);
    req.add_materialize(998);
    grpc::Status m = stub_->CompileStep(&ctx, req, &c);
    EXPECT_CODE(m, INVALID_ARGUMENT);
    EXPECT_NE(m.error_message().find("materialize: node 998"), std::string::npos) << m.error_message();
  }
  s = compile(sid, {op(32, v1::NEG, {2})}, {2}, {}, {{2, 32}}, &c);
  EXPECT_CODE(s, INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("also an input"), std::string::npos) << s.error_message();
  // A failed compile leaves none of its nodes behind: the ids can be sent again.
  v1::RealizeResponse r;
  EXPECT_TRUE(realize(sid, {op(30, v1::NEG, {1})}, {30}, &r).ok());

  v1::RunStepResponse out;
  s = run(sid, step, {data_input(2, {1, 2})}, &out);
  EXPECT_CODE(s, INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("input node 2"), std::string::npos) << s.error_message();
  s = run(sid, step, {data_input(1, {1, 2, 3})}, &out);
  EXPECT_CODE(s, INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("not an input"), std::string::npos) << s.error_message();
  v1::StepInput bad_handle;
  bad_handle.set_node_id(2);
  bad_handle.set_handle(r.results(0).handle() + 12345);
  EXPECT_CODE(run(sid, step, {bad_handle}, &out), NOT_FOUND);
  // Nothing above changed w; a good run still works.
  EXPECT_EQ(value(sid, 1), (std::vector<float>{1, 2, 3}));
  ASSERT_TRUE(run(sid, step, {data_input(2, {2, 2, 2})}, &out).ok());
  EXPECT_EQ(value(sid, 1), (std::vector<float>{0, 1, 2}));
  ASSERT_TRUE(close_session(sid).ok());
}

// Equal values are hash-consed into one buffer; assigning one of them must not change the other.
TEST_F(StepTest, TargetSharingABufferGetsItsOwnCopy) {
  const std::string sid = create_session();
  v1::RealizeResponse r;
  ASSERT_TRUE(realize(sid, {inline_buffer(1, v1::FLOAT32, {2}, bytes_of(std::vector<float>{1, 2})),
                            op(2, v1::NEG, {1}), op(3, v1::NEG, {1})},
                      {2, 3}, &r)
                  .ok());
  v1::CompileStepResponse c;
  ASSERT_TRUE(compile(sid, {float_const(4, 10, {2}), op(5, v1::ADD, {2, 4})}, {}, {}, {{2, 5}}, &c).ok());
  v1::RunStepResponse out;
  ASSERT_TRUE(run(sid, c.step_id(), {}, &out).ok());
  ASSERT_TRUE(run(sid, c.step_id(), {}, &out).ok());
  EXPECT_EQ(value(sid, 2), (std::vector<float>{19, 18}));
  EXPECT_EQ(value(sid, 3), (std::vector<float>{-1, -2}));
  ASSERT_TRUE(close_session(sid).ok());
}

// A target computed by a graph no longer holds that graph's value once a run wrote it: an equal
// graph sent afterwards is computed, not answered with the target's buffer.
TEST_F(StepTest, EqualGraphAfterRunIsNotTheTarget) {
  const std::string sid = create_session();
  v1::RealizeResponse r;
  ASSERT_TRUE(realize(sid, {inline_buffer(1, v1::FLOAT32, {2}, bytes_of(std::vector<float>{1, 2})),
                            op(2, v1::NEG, {1})},
                      {2}, &r)
                  .ok());
  v1::CompileStepResponse c;
  ASSERT_TRUE(compile(sid, {float_const(4, 10, {2}), op(5, v1::ADD, {2, 4})}, {}, {}, {{2, 5}}, &c).ok());
  v1::RunStepResponse out;
  ASSERT_TRUE(run(sid, c.step_id(), {}, &out).ok());
  EXPECT_EQ(value(sid, 2), (std::vector<float>{9, 8}));
  ASSERT_TRUE(realize(sid, {op(6, v1::NEG, {1})}, {6}, &r).ok());
  EXPECT_EQ(values_of<float>(r.results(0).data()), (std::vector<float>{-1, -2}));
  ASSERT_TRUE(close_session(sid).ok());
}

// An uploaded handle as the target; an output too big to inline comes back as a handle to a copy.
TEST_F(StepTest, HandleTargetAndLargeOutput) {
  const std::string sid = create_session();
  constexpr int64_t n = 400000;  // 1.6 MB of float32: past the default inline limit
  v1::RealizeResponse r;
  ASSERT_TRUE(realize(sid, {float_const(1, 1.0, {n}), op(2, v1::ADD, {1, 1})}, {2}, &r).ok());
  const uint64_t handle = r.results(0).handle();
  grpc::ClientContext ctx;
  v1::CompileStepRequest req;
  req.set_session_id(sid);
  *req.add_nodes() = handle_buffer(3, handle);
  *req.add_nodes() = float_const(4, 0.5, {n});
  *req.add_nodes() = op(5, v1::MUL, {3, 4});
  req.add_outputs(5);
  v1::StepAssign* a = req.add_assigns();
  a->set_target_handle(handle);
  a->set_value(5);
  v1::CompileStepResponse c;
  ASSERT_TRUE(stub_->CompileStep(&ctx, req, &c).ok());
  v1::RunStepResponse out;
  ASSERT_TRUE(run(sid, c.step_id(), {}, &out).ok());
  ASSERT_TRUE(run(sid, c.step_id(), {}, &out).ok());
  ASSERT_FALSE(out.outputs(0).has_data());
  ASSERT_NE(out.outputs(0).handle(), 0u);
  for (uint64_t h : {out.outputs(0).handle(), handle}) {
    grpc::ClientContext dctx;
    v1::DownloadRequest dreq;
    dreq.set_session_id(sid);
    dreq.set_handle(h);
    auto reader = stub_->Download(&dctx, dreq);
    v1::DownloadChunk chunk;
    std::string bytes;
    while (reader->Read(&chunk)) bytes += chunk.data();
    ASSERT_TRUE(reader->Finish().ok());
    std::vector<float> v = values_of<float>(bytes);
    ASSERT_EQ(v.size(), static_cast<size_t>(n));
    EXPECT_EQ(v.front(), 0.5f);  // 2 halved twice
    EXPECT_EQ(v.back(), 0.5f);
  }
  ASSERT_TRUE(close_session(sid).ok());
}

// Concurrent RunSteps of one session each run with the inputs they sent: w accumulates every
// thread's x exactly once per run.
TEST_F(StepTest, ConcurrentRunsUseTheirOwnInputs) {
  constexpr int64_t n = 200000;  // big enough that a run and another call's feed would overlap
  const std::string sid = create_session();
  v1::RealizeResponse r;
  ASSERT_TRUE(realize(sid, {inline_buffer(1, v1::FLOAT32, {n}, bytes_of(std::vector<float>(n, 0))),
                            inline_buffer(2, v1::FLOAT32, {n}, bytes_of(std::vector<float>(n, 0)))},
                      {}, &r)
                  .ok());
  v1::CompileStepResponse c;
  ASSERT_TRUE(compile(sid, {op(3, v1::ADD, {1, 2})}, {2}, {}, {{1, 3}}, &c).ok());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 1; t <= 4; ++t) {
    threads.emplace_back([&, t] {
      auto stub = make_stub(server_->tcp_address());
      const v1::StepInput x = data_input(2, std::vector<float>(n, static_cast<float>(t)));
      for (int i = 0; i < 25; ++i) {
        grpc::ClientContext ctx;
        v1::RunStepRequest req;
        req.set_session_id(sid);
        req.set_step_id(c.step_id());
        *req.add_inputs() = x;
        v1::RunStepResponse out;
        if (!stub->RunStep(&ctx, req, &out).ok()) failures.fetch_add(1);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  v1::RealizeResponse w;
  ASSERT_TRUE(realize(sid, {reduce(4, v1::REDUCE_MAX, 1, {0}), op(5, v1::NEG, {1}), reduce(6, v1::REDUCE_MAX, 5, {0})},
                      {4, 6}, &w)
                  .ok());
  EXPECT_EQ(values_of<float>(w.results(0).data()), (std::vector<float>{250}));  // 25 * (1 + 2 + 3 + 4)
  EXPECT_EQ(values_of<float>(w.results(1).data()), (std::vector<float>{-250}));  // min is 250 too
  ASSERT_TRUE(close_session(sid).ok());
}

TEST_F(StepTest, ClosingTheSessionFreesItsSteps) {
  ASSERT_TRUE(eventually([&] { return server_->sessions().live() == 0; }));  // earlier tests' sessions
  const int64_t baseline = Buffer::live_count();
  const std::string sid = create_session();
  const uint64_t step = sgd_like_step(sid);
  v1::RunStepResponse out;
  ASSERT_TRUE(run(sid, step, {data_input(2, {1, 1, 1})}, &out).ok());
  EXPECT_GT(Buffer::live_count(), baseline);
  ASSERT_TRUE(close_session(sid).ok());
  EXPECT_EQ(Buffer::live_count(), baseline);
  EXPECT_CODE(run(sid, step, {}, &out), NOT_FOUND);
}

// A step's buffers (its output, the intermediates, the value copied into w) are the session's
// holdings like any others, so session and tenant quotas cover them; releasing the step refunds
// them down to the two realized inputs (2 x 3 floats).
TEST_F(StepTest, StepBuffersCountAsTheSessionsHoldings) {
  const std::string sid = create_session();
  const uint64_t step = sgd_like_step(sid);
  absl::StatusOr<std::shared_ptr<Session>> session = server_->sessions().find(sid, "");
  ASSERT_TRUE(session.ok()) << session.status();
  const uint64_t with_step = (*session)->held_bytes();
  ASSERT_TRUE(release_step(sid, step).ok());
  EXPECT_EQ((*session)->held_bytes(), 2 * 3 * sizeof(float));
  EXPECT_GT(with_step, (*session)->held_bytes());
  ASSERT_TRUE(close_session(sid).ok());
}

// A step's random nodes of the traced streams draw what RunStep's `random` keys them to (each run
// exactly what a realize of that seed and counter draws), and keep the last key when a run names
// none; a random node outside the traced streams keeps its numbers; a counter past 32 bits is
// INVALID_ARGUMENT.
TEST_F(StepTest, RandomNodesDrawWhatEachRunKeysThemTo) {
  const auto rand_node = [](uint64_t id, uint64_t seed, uint64_t counter) {
    v1::Node n;
    n.set_id(id);
    n.set_op(v1::RAND);
    n.set_dtype(v1::FLOAT32);
    n.mutable_composite()->set_seed(seed);
    n.mutable_composite()->set_counter(counter);
    n.mutable_composite()->add_shape(8);
    return n;
  };
  const std::string other = create_session();
  uint64_t next_id = 1;
  const auto drawn = [&](uint64_t seed, uint64_t counter) {
    const uint64_t id = next_id++;
    v1::RealizeResponse r;
    grpc::Status s = realize(other, {rand_node(id, seed, counter)}, {id}, &r);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return s.ok() ? values_of<float>(r.results(0).data()) : std::vector<float>{};
  };
  const auto sum = [](std::vector<float> a, const std::vector<float>& b) {
    for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
    return a;
  };

  const std::string sid = create_session();
  grpc::ClientContext cctx;
  v1::CompileStepRequest creq;
  creq.set_session_id(sid);
  *creq.add_nodes() = rand_node(1, 7, 10);  // drawn by the trace: counters [10, 11) of seed 7
  *creq.add_nodes() = rand_node(2, 7, 3);   // made before it: keeps its numbers
  *creq.add_nodes() = op(3, v1::ADD, {1, 2});
  creq.add_outputs(1);
  creq.add_outputs(3);
  creq.mutable_random()->set_seed(7);
  creq.mutable_random()->set_counter_base(10);
  creq.mutable_random()->set_count(1);
  v1::CompileStepResponse c;
  grpc::Status s = stub_->CompileStep(&cctx, creq, &c);
  ASSERT_TRUE(s.ok()) << s.error_message();

  const auto run_with = [&](std::optional<std::pair<uint64_t, uint64_t>> key) {
    grpc::ClientContext ctx;
    v1::RunStepRequest req;
    req.set_session_id(sid);
    req.set_step_id(c.step_id());
    req.set_want_data(true);
    if (key) {
      req.mutable_random()->set_seed(key->first);
      req.mutable_random()->set_counter_base(key->second);
    }
    v1::RunStepResponse resp;
    grpc::Status st = stub_->RunStep(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    if (!st.ok()) return std::pair<std::vector<float>, std::vector<float>>{};
    return std::pair{values_of<float>(resp.outputs(0).data()), values_of<float>(resp.outputs(1).data())};
  };
  const std::vector<float> before = drawn(7, 3);
  auto [traced, traced_sum] = run_with(std::nullopt);
  EXPECT_EQ(traced, drawn(7, 10));
  EXPECT_EQ(traced_sum, sum(traced, before));
  auto [next, next_sum] = run_with(std::pair<uint64_t, uint64_t>{7, 11});
  EXPECT_EQ(next, drawn(7, 11));
  EXPECT_EQ(next_sum, sum(next, before));
  auto [reseeded, reseeded_sum] = run_with(std::pair<uint64_t, uint64_t>{0x123456789ABCDEFull, 0xFFFFFFFFull});
  EXPECT_EQ(reseeded, drawn(0x123456789ABCDEFull, 0xFFFFFFFFull));
  EXPECT_EQ(run_with(std::nullopt).first, reseeded);  // no key named: the last one stays

  grpc::ClientContext bctx;
  v1::RunStepRequest bad;
  bad.set_session_id(sid);
  bad.set_step_id(c.step_id());
  bad.mutable_random()->set_counter_base(uint64_t{1} << 32);
  v1::RunStepResponse bresp;
  grpc::Status b = stub_->RunStep(&bctx, bad, &bresp);
  EXPECT_EQ(b.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(b.error_message().find("32 bits"), std::string::npos) << b.error_message();
  EXPECT_TRUE(close_session(sid).ok());
  EXPECT_TRUE(close_session(other).ok());
}

TEST_F(StepTest, StepsInsideTheExecuteStream) {
  const int64_t baseline = Buffer::live_count();
  grpc::ClientContext ctx;
  auto stream = stub_->Execute(&ctx);
  v1::ExecuteRequest req;
  v1::ExecuteResponse resp;
  req.set_request_id(1);
  req.mutable_open();
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->Read(&resp));
  ASSERT_TRUE(resp.has_opened());

  req.Clear();
  req.set_request_id(2);
  v1::RealizeRequest* rr = req.mutable_realize();
  *rr->add_nodes() = inline_buffer(1, v1::FLOAT32, {2}, bytes_of(std::vector<float>{1, 2}));
  rr->add_outputs(1);
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->Read(&resp));
  ASSERT_TRUE(resp.has_realized()) << resp.DebugString();

  req.Clear();
  req.set_request_id(3);
  v1::CompileStepRequest* cs = req.mutable_compile_step();
  *cs->add_nodes() = op(2, v1::ADD, {1, 1});
  cs->add_outputs(2);
  v1::StepAssign* a = cs->add_assigns();
  a->set_target_node(1);
  a->set_value(2);
  const v1::CompileStepRequest compile = *cs;  // req.Clear() below frees *cs
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->Read(&resp));
  ASSERT_TRUE(resp.has_step_compiled()) << resp.DebugString();
  const uint64_t step = resp.step_compiled().step_id();

  for (int i = 0; i < 3; ++i) {
    req.Clear();
    req.set_request_id(4 + i);
    req.mutable_run_step()->set_step_id(step);
    req.mutable_run_step()->set_want_data(true);
    ASSERT_TRUE(stream->Write(req));
    ASSERT_TRUE(stream->Read(&resp));
    ASSERT_TRUE(resp.has_step_ran()) << resp.DebugString();
  }
  // Doubled three times: the last run returned 4 * [1, 2] * 2.
  EXPECT_EQ(values_of<float>(resp.step_ran().outputs(0).data()), (std::vector<float>{8, 16}));

  req.Clear();
  req.set_request_id(10);
  req.mutable_release_step()->set_step_id(step);
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->Read(&resp));
  EXPECT_TRUE(resp.has_step_released()) << resp.DebugString();
  req.Clear();
  req.set_request_id(11);
  req.mutable_run_step()->set_step_id(step);
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->Read(&resp));
  ASSERT_TRUE(resp.has_error());
  EXPECT_EQ(resp.error().code(), static_cast<int>(grpc::StatusCode::NOT_FOUND));

  // A step alive when the stream drops goes with the stream's session.
  req.Clear();
  req.set_request_id(12);
  *req.mutable_compile_step() = compile;
  req.mutable_compile_step()->clear_nodes();
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->Read(&resp));
  ASSERT_TRUE(resp.has_step_compiled()) << resp.DebugString();
  stream->WritesDone();
  ASSERT_TRUE(stream->Finish().ok());
  EXPECT_TRUE(eventually([&] { return Buffer::live_count() == baseline; })) << Buffer::live_count() << " vs " << baseline;
}

}  // namespace
}  // namespace polygrad::server
