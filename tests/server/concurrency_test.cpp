// Sessions shared by plain threads, with no gRPC between them. Under gRPC (Debian's, not built
// with ThreadSanitizer) every race involving a handler thread is dropped by scripts/tsan.supp, so
// this is where the ctest-tsan suite sees the session table, a session's node and handle tables,
// the orphan sweep, quotas, idle reaping and the engine's shared kernel builds meet: the same
// calls the handlers make, from threads TSan watches end to end.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "core/engine/engine.h"
#include "core/runtime/buffer.h"
#include "server/options.h"
#include "server/quota.h"
#include "server/session.h"
#include "tests/server/test_util.h"

namespace polygrad::server {
namespace {

using namespace polygrad::server::testing;

// A session that another thread closed (or the reaper reaped) answers NOT_FOUND, or ABORTED
// naming the session for a call it stopped; nothing else is an acceptable failure here (before
// Session::stopped, a realize stopped between kernels said only "CANCELLED: realize cancelled").
bool closed_under_us(const absl::Status& s) {
  if (s.code() == absl::StatusCode::kNotFound) return true;
  return s.code() == absl::StatusCode::kAborted && absl::StrContains(s.message(), "was closed during the");
}

class SessionPool {
 public:
  explicit SessionPool(SessionManager& manager) : manager_(manager) {}

  // A live session: one of the pool's, or a new one when the pool's pick was closed.
  std::shared_ptr<Session> any(std::mt19937& rng) {
    std::string id;
    {
      std::lock_guard lock(mu_);
      if (!ids_.empty()) id = ids_[rng() % ids_.size()];
    }
    if (!id.empty()) {
      absl::StatusOr<std::shared_ptr<Session>> found = manager_.find(id, "");
      if (found.ok()) return *found;
      EXPECT_TRUE(closed_under_us(found.status())) << found.status();
    }
    absl::StatusOr<std::shared_ptr<Session>> made = manager_.create("");
    EXPECT_TRUE(made.ok()) << made.status();
    if (!made.ok()) return nullptr;
    std::lock_guard lock(mu_);
    ids_[rng() % ids_.size()] = (*made)->id();
    return *made;
  }

  void seed(size_t n) {
    for (size_t i = 0; i < n; ++i) ids_.push_back((*manager_.create(""))->id());
  }
  std::string pick(std::mt19937& rng) {
    std::lock_guard lock(mu_);
    return ids_[rng() % ids_.size()];
  }

 private:
  SessionManager& manager_;
  std::mutex mu_;
  std::vector<std::string> ids_;
};

// One client's work on a session: a realize of a fresh graph, a check of its answer, an upload,
// then releasing everything it made (some of it through release_nodes, some through Release).
void one_round(Session& session, uint64_t base, int value, std::atomic<int>& answered) {
  v1::RealizeRequest request;
  const float x = static_cast<float>(value);
  *request.add_nodes() = inline_buffer(base, v1::FLOAT32, {4}, bytes_of(std::vector<float>{x, x + 1, x + 2, x + 3}));
  *request.add_nodes() = op(base + 1, v1::ADD, {base, base});
  *request.add_nodes() = op(base + 2, v1::NEG, {base + 1});
  request.add_outputs(base + 2);
  request.set_want_data(true);
  request.add_release_nodes(base + 1);
  Transfer transfer;
  absl::StatusOr<v1::RealizeResponse> done = session.realize(request, [] { return false; }, transfer);
  if (!done.ok()) {
    EXPECT_TRUE(closed_under_us(done.status())) << done.status();
    return;
  }
  EXPECT_EQ(values_of<float>(done->results(0).data()),
            (std::vector<float>{-2 * x, -2 * (x + 1), -2 * (x + 2), -2 * (x + 3)}));
  answered.fetch_add(1);

  v1::UploadHeader header;
  header.set_dtype(v1::FLOAT32);
  header.add_shape(2);
  absl::StatusOr<PendingUpload> upload = session.begin_upload(header);
  v1::ReleaseRequest release;
  release.add_node_ids(base);
  release.add_node_ids(base + 2);
  if (upload.ok() && upload->append(bytes_of(std::vector<float>{x, -x})).ok()) {
    absl::StatusOr<v1::UploadResponse> uploaded = session.finish_upload(*std::move(upload));
    if (uploaded.ok()) {
      release.add_handles(uploaded->handle());
    } else {
      EXPECT_TRUE(closed_under_us(uploaded.status())) << uploaded.status();
    }
  } else if (!upload.ok()) {
    EXPECT_TRUE(closed_under_us(upload.status())) << upload.status();
  }
  absl::Status released = session.release(release);
  if (!released.ok()) {
    EXPECT_TRUE(closed_under_us(released)) << released;
  }
}

TEST(SessionConcurrency, ClientsShareSessionsWhileOthersCloseAndReapThem) {
  const std::filesystem::path cache = std::filesystem::temp_directory_path() /
                                      ("polygrad-concurrency-" + std::to_string(::getpid()));
  const int64_t buffers_before = Buffer::live_count();
  {
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::create({.cache_dir = cache, .threads = 2, .devices = {"cpu"}});
    ASSERT_TRUE(engine.ok()) << engine.status();
    Limits limits;
    Quotas quotas(limits, {});
    SessionManager manager(**engine, limits, std::chrono::seconds(600), std::chrono::milliseconds(1000), {}, &quotas);
    SessionPool pool(manager);
    pool.seed(3);

    constexpr int kClients = 4;
    constexpr int kRounds = 12;
    std::atomic<int> answered{0};
    std::atomic<int> clients_left{kClients};
    std::atomic<int> closers_running{0};
    std::vector<std::thread> threads;
    for (int c = 0; c < kClients; ++c) {
      threads.emplace_back([&, c] {
        std::mt19937 rng(c + 1);
        for (int r = 0; r < kRounds; ++r) {
          std::shared_ptr<Session> session = pool.any(rng);
          if (session) one_round(*session, (uint64_t(c) << 32) + uint64_t(r) * 8 + 1, c * 100 + r % 3, answered);
          // The first round ran before anything closes sessions (so it answered); the rest run
          // while the closers do.
          while (r == 0 && closers_running.load() < 2) std::this_thread::yield();
        }
        clients_left.fetch_sub(1);
      });
    }
    // Closing sessions under the clients' feet, as CloseSession and the idle reaper do, once
    // every client has had its first answer.
    auto start_closing = [&] {
      while (answered.load() < kClients) std::this_thread::yield();
      closers_running.fetch_add(1);
    };
    threads.emplace_back([&] {
      start_closing();
      std::mt19937 rng(99);
      while (clients_left.load() > 0) {
        (void)manager.close_any(pool.pick(rng), "closed by the test");
        std::this_thread::yield();
      }
    });
    threads.emplace_back([&] {
      start_closing();
      while (clients_left.load() > 0) {
        manager.reap(Clock::now() + std::chrono::hours(1));  // every session not in use is idle
        std::this_thread::yield();
      }
    });
    for (std::thread& t : threads) t.join();

    // Later rounds may find their session closed (which depends on the scheduler); the first
    // round of every client answered.
    EXPECT_GE(answered.load(), kClients);
    manager.close_all("end of test");
    EXPECT_EQ(manager.live(), 0u);
  }
  EXPECT_EQ(Buffer::live_count(), buffers_before) << "buffers outlived every session and the engine";
  std::filesystem::remove_all(cache);
}

}  // namespace
}  // namespace polygrad::server
