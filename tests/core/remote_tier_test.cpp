// The remote tier's own rules, over an in-process store the test controls (tests/e2e/
// test_remote_cache.py runs the same tier against real nginx and redis-server): signatures,
// the circuit breaker, read-only mode, uploads that skip what the remote holds, and the URL forms
// open_remote_store accepts.
#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include "core/cache/cache_entry.h"
#include "core/cache/kernel_cache.h"
#include "core/cache/remote_tier.h"

namespace polygrad {
namespace {

const std::string kSecret = "the fleet's secret, long enough";

// Entries in a map; `down` makes every operation fail as an unreachable server would.
class MapStore final : public RemoteStore {
 public:
  struct State {
    std::mutex mu;
    std::map<std::string, std::string> entries;
    bool down = false;
    int calls = 0, puts = 0;
  };
  explicit MapStore(std::shared_ptr<State> s) : s_(std::move(s)) {}

  absl::StatusOr<std::optional<std::string>> get(const std::string& key) override {
    std::lock_guard lock(s_->mu);
    ++s_->calls;
    if (s_->down) return absl::UnavailableError("down");
    auto it = s_->entries.find(key);
    if (it == s_->entries.end()) return std::optional<std::string>();
    return std::optional<std::string>(it->second);
  }
  absl::StatusOr<bool> contains(const std::string& key) override {
    std::lock_guard lock(s_->mu);
    ++s_->calls;
    if (s_->down) return absl::DeadlineExceededError("slow");
    return s_->entries.count(key) > 0;
  }
  absl::Status put(const std::string& key, const std::string& bytes) override {
    std::lock_guard lock(s_->mu);
    ++s_->calls;
    ++s_->puts;
    if (s_->down) return absl::UnavailableError("down");
    s_->entries[key] = bytes;
    return absl::OkStatus();
  }
  std::string describe() const override { return "map"; }

 private:
  std::shared_ptr<State> s_;
};

std::string key_of(int i) { return KernelCache::key("CPU", "cc", std::to_string(i)); }
const auto kAnyPayload = [](const std::string&) { return true; };

TEST(RemoteTier, EntriesLoadOnlyWhenSignedWithTheTiersSecret) {
  auto state = std::make_shared<MapStore::State>();
  {
    RemoteTier writer(std::make_unique<MapStore>(state), kSecret, {});
    writer.upload(key_of(1), "payload one");
    writer.upload(key_of(2), "payload two");
    writer.flush();
    EXPECT_EQ(writer.stats().stored, 2u);
  }
  RemoteTier reader(std::make_unique<MapStore>(state), kSecret, {});
  EXPECT_EQ(reader.fetch(key_of(1), kAnyPayload), "payload one");
  EXPECT_EQ(reader.fetch(key_of(3), kAnyPayload), std::nullopt);  // a miss

  RemoteTier stranger(std::make_unique<MapStore>(state), "another fleet's secret!!", {});
  EXPECT_EQ(stranger.fetch(key_of(1), kAnyPayload), std::nullopt);

  // An entry moved to another key, a flipped bit, and an entry only hashed: all rejected.
  state->entries[key_of(4)] = state->entries[key_of(1)];
  state->entries[key_of(2)].back() ^= 1;
  state->entries[key_of(5)] = encode_cache_entry(raw_cache_key(key_of(5)), "unsigned");
  for (int i : {2, 4, 5}) EXPECT_EQ(reader.fetch(key_of(i), kAnyPayload), std::nullopt) << i;
  // A signed entry the loader cannot use is rejected too (and so recompiled).
  EXPECT_EQ(reader.fetch(key_of(1), [](const std::string&) { return false; }), std::nullopt);
  const RemoteTier::Stats s = reader.stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.rejected, 4u);
  EXPECT_EQ(stranger.stats().rejected, 1u);
}

TEST(RemoteTier, AFailureOpensTheBreakerSoTheRemoteCostsOneTryPerInterval) {
  auto state = std::make_shared<MapStore::State>();
  state->down = true;
  RemoteTierOptions closed_for_long;
  closed_for_long.breaker = std::chrono::hours(1);
  RemoteTier tier(std::make_unique<MapStore>(state), kSecret, closed_for_long);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(tier.fetch(key_of(i), kAnyPayload), std::nullopt);
  tier.upload(key_of(0), "x");
  tier.flush();
  EXPECT_EQ(state->calls, 1);  // only the first lookup reached the store
  RemoteTier::Stats s = tier.stats();
  EXPECT_EQ(s.errors, 1u);
  EXPECT_EQ(s.skipped, 19u);
  EXPECT_EQ(s.upload_skipped, 1u);

  // With no interval, each try after a failure is a probe: the store recovers, the tier closes.
  RemoteTierOptions no_wait;
  no_wait.breaker = std::chrono::milliseconds(0);
  RemoteTier probing(std::make_unique<MapStore>(state), kSecret, no_wait);
  EXPECT_EQ(probing.fetch(key_of(1), kAnyPayload), std::nullopt);
  state->down = false;
  probing.upload(key_of(1), "back");
  probing.flush();
  EXPECT_EQ(probing.fetch(key_of(1), kAnyPayload), "back");
  s = probing.stats();
  EXPECT_EQ(s.errors, 1u);
  EXPECT_EQ(s.stored, 1u);
  EXPECT_EQ(s.hits, 1u);
}

TEST(RemoteTier, ReadOnlyNeverWritesAndPresentEntriesAreNotSentAgain) {
  auto state = std::make_shared<MapStore::State>();
  RemoteTierOptions ro;
  ro.read_only = true;
  RemoteTier reader(std::make_unique<MapStore>(state), kSecret, ro);
  reader.upload(key_of(1), "x");
  reader.flush();
  EXPECT_EQ(state->calls, 0);

  RemoteTier a(std::make_unique<MapStore>(state), kSecret, {});
  RemoteTier b(std::make_unique<MapStore>(state), kSecret, {});
  a.upload(key_of(1), "x");
  a.flush();
  b.upload(key_of(1), "x");
  b.flush();
  EXPECT_EQ(state->puts, 1);
  EXPECT_EQ(b.stats().present, 1u);
}

TEST(RemoteTier, UploadsBeyondTheQueueAreDroppedNotBlocked) {
  auto state = std::make_shared<MapStore::State>();
  RemoteTierOptions small;
  small.max_queued_uploads = 2;
  std::unique_lock hold(state->mu);  // the uploader blocks on its first store call
  RemoteTier tier(std::make_unique<MapStore>(state), kSecret, small);
  for (int i = 0; i < 10; ++i) tier.upload(key_of(i), "x");  // returns at once however full
  const uint64_t dropped = tier.stats().dropped;
  hold.unlock();
  tier.flush();
  const RemoteTier::Stats s = tier.stats();
  EXPECT_GE(dropped, 10u - 3u);  // at most one taken by the uploader plus two queued
  EXPECT_EQ(s.stored + s.dropped, 10u);
}

TEST(RemoteStoreUrl, AcceptsHttpHttpsAndRedisAndSaysWhatIsWrongOtherwise) {
  const auto t = std::chrono::milliseconds(100);
  for (const char* ok : {"http://127.0.0.1:8080/cache", "https://cache.example:443/", "http://[::1]:80",
                         "redis://127.0.0.1:6379/0", "redis://:pw@host", "redis://user:pw@host:1/15"}) {
    EXPECT_TRUE(open_remote_store(ok, t).ok()) << ok;
  }
  EXPECT_EQ(open_remote_store("redis://user:pw@host:1/15", t).value()->describe(), "redis://host:1/15");
  EXPECT_EQ(open_remote_store("http://u:secret@h:1/p", t).value()->describe(), "http://h:1/p");
  for (auto [bad, says] : std::initializer_list<std::pair<const char*, const char*>>{
           {"cache.example", "scheme://"},
           {"ftp://h/x", "unsupported scheme"},
           {"redis://h:0/0", "port"},
           {"http://:80/", "no host"},
           {"redis://h/x", "database number"},
           {"http://[::1/", "unterminated"}}) {
    absl::StatusOr<std::unique_ptr<RemoteStore>> s = open_remote_store(bad, t);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(says), std::string_view::npos) << s.status();
  }
  // The name on the remote carries the entry format, and is what content-addressed caches accept.
  EXPECT_TRUE(KernelCache::valid_key(remote_entry_name(key_of(1))));
  EXPECT_NE(remote_entry_name(key_of(1)), key_of(1));
}

}  // namespace
}  // namespace polygrad
