// Unit tests of the server's pieces that need no running daemon: options, logs, status map,
// shape limits, dtype table.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "absl/strings/str_cat.h"
#include "server/bounded.h"
#include "server/decode.h"
#include "server/failed_nodes.h"
#include "server/decode_ops.h"
#include "server/log.h"
#include "server/memory_trim.h"
#include "server/options.h"
#include "server/status.h"

namespace polygrad::server {
namespace {

// ---- correctness ----------------------------------------------------------------------------

TEST(FailedNodes, RemembersTheNewestIdsUpToItsCapacity) {
  FailedNodes failed(4);
  google::protobuf::RepeatedPtrField<v1::Node> nodes;
  for (uint64_t id = 1; id <= 3; ++id) nodes.Add()->set_id(id);
  failed.record(nodes, absl::InvalidArgumentError(std::string(1000, 'x')));
  ASSERT_NE(failed.find(2), nullptr);
  EXPECT_EQ(failed.find(2)->code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LE(failed.find(2)->message().size(), 410u);  // bounded: messages may quote each other
  nodes.Clear();
  for (uint64_t id = 4; id <= 6; ++id) nodes.Add()->set_id(id);
  failed.record(nodes, absl::ResourceExhaustedError("limit"));
  EXPECT_EQ(failed.size(), 4u);
  EXPECT_EQ(failed.find(1), nullptr);
  EXPECT_EQ(failed.find(2), nullptr);
  ASSERT_NE(failed.find(6), nullptr);
  EXPECT_EQ(failed.find(6)->code(), absl::StatusCode::kResourceExhausted);
  failed.forget(6);
  EXPECT_EQ(failed.find(6), nullptr);
  failed.record(nodes, absl::OkStatus());  // nothing failed: nothing to remember
  EXPECT_EQ(failed.find(6), nullptr);
}

TEST(Options, LoopbackAddresses) {
  EXPECT_TRUE(is_loopback_address("127.0.0.1:50051"));
  EXPECT_TRUE(is_loopback_address("127.1.2.3:0"));
  EXPECT_TRUE(is_loopback_address("localhost:1"));
  EXPECT_TRUE(is_loopback_address("[::1]:50051"));
  EXPECT_FALSE(is_loopback_address("0.0.0.0:50051"));
  EXPECT_FALSE(is_loopback_address("[::]:50051"));
  EXPECT_FALSE(is_loopback_address("10.0.0.1:50051"));
  EXPECT_FALSE(is_loopback_address("example.com:50051"));
}

TEST(Options, NonLoopbackNeedsExplicitInsecureFlag) {
  ServerOptions o;
  o.listen = "0.0.0.0:50051";
  absl::Status s = validate(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--insecure-allow-remote"), absl::string_view::npos) << s;
  o.insecure_allow_remote = true;
  EXPECT_TRUE(validate(o).ok());
}

TEST(Options, CacheKeyFileIsReadWithoutItsTrailingNewlineAndMustBeLongEnough) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("polygrad-cache-key-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto write = [&](const char* name, const std::string& bytes) {
    std::ofstream(dir / name, std::ios::binary) << bytes;
    return dir / name;
  };
  absl::StatusOr<std::string> key = read_cache_key(write("good", "0123456789abcdef0123\n"));
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(*key, "0123456789abcdef0123");
  absl::StatusOr<std::string> short_key = read_cache_key(write("short", "secret\n"));
  EXPECT_EQ(short_key.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(short_key.status().message().find("fewer than the 16"), absl::string_view::npos) << short_key.status();
  EXPECT_EQ(short_key.status().message().find("secret"), absl::string_view::npos) << "the key was echoed";
  absl::StatusOr<std::string> missing = read_cache_key(dir / "absent");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("--cache-key-file"), absl::string_view::npos) << missing.status();
  std::filesystem::remove_all(dir);
}

// Resident bytes of this process, from /proc.
size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

// A thread's arena left fragmented (every 64th block kept, so nothing is free at its top): free()
// alone keeps the freed pages mapped, trim_free_memory gives them back. Once, this silently did
// nothing (its glibc check ran before any header defined __GLIBC__).
TEST(MemoryTrim, GivesFreedPagesInTheMiddleOfAnArenaBack) {
#if !defined(__GLIBC__)
  GTEST_SKIP() << "malloc_trim is glibc's";
#endif
#if defined(POLYGRAD_ASAN_BUILD) || defined(POLYGRAD_TSAN_BUILD)
  GTEST_SKIP() << "the sanitizer's allocator stands in for glibc's malloc, which malloc_trim trims";
#endif
  constexpr size_t kBlocks = 64 * 1024, kBlock = 1024;  // 64 MiB
  std::vector<char*> kept;
  std::thread([&] {
    std::vector<char*> blocks(kBlocks);
    for (char*& b : blocks) {
      b = static_cast<char*>(std::malloc(kBlock));
      std::memset(b, 1, kBlock);
    }
    for (size_t i = 0; i < kBlocks; ++i) {
      if (i % 64 == 0) kept.push_back(blocks[i]);
      else std::free(blocks[i]);
    }
  }).join();
  const size_t before = resident_bytes();
  trim_free_memory();
  const size_t after_trim = resident_bytes();
  for (char* b : kept) std::free(b);
  EXPECT_LT(after_trim + kBlocks * kBlock / 2, before) << "resident " << before << " -> " << after_trim << " bytes";
}

// Once the daemon keeps freed memory mapped, a 768 KiB block comes from an arena (whose free
// memory a freed block returns to), while a block of 1 MiB or more (the host allocator's cache
// keeps those itself) that no free memory of the arenas can hold is mapped on its own, so free()
// gives it back at once (glibc serves any block from free arena memory first, so a large block
// must exceed all of it: earlier tests in this process leave some). With glibc's defaults the
// small block was mapped on its own too, and unmapped by free(): every step that reallocated its
// buffers paid for fresh pages. Counted by mallinfo2's bytes in blocks mapped on their own.
TEST(MemoryTrim, BlocksUnderAMebibyteComeFromTheArenas) {
#if !defined(__GLIBC__) || !__GLIBC_PREREQ(2, 33)
  GTEST_SKIP() << "mallopt and mallinfo2 are glibc's";
#else
#if defined(POLYGRAD_ASAN_BUILD) || defined(POLYGRAD_TSAN_BUILD)
  GTEST_SKIP() << "the sanitizer's allocator stands in for glibc's malloc, which mallopt configures";
#endif
  keep_freed_memory_mapped();
  // Bytes in blocks mapped on their own while a block of `bytes` is held.
  // Signed: a block another thread unmapped meanwhile must not wrap around to a huge count.
  const auto mapped_while_held = [](size_t bytes) {
    const auto before = static_cast<int64_t>(mallinfo2().hblkhd);
    char* b = static_cast<char*>(std::malloc(bytes));
    asm volatile("" : : "r"(b) : "memory");  // the compiler may not drop the block
    const auto held = static_cast<int64_t>(mallinfo2().hblkhd);
    std::free(b);
    return held - before;
  };
  constexpr int64_t kSmall = 768 << 10;
  EXPECT_LT(mapped_while_held(kSmall), kSmall / 2) << "a 768 KiB block was mapped on its own";
  const auto large = static_cast<int64_t>(mallinfo2().fordblks) + (4 << 20);  // more than the arenas have free
  EXPECT_GE(mapped_while_held(large), large) << "a block of " << large << " bytes came from an arena";
#endif
}

// What heap_bytes_in_use counts follows what is held, not what is mapped: blocks kept count in
// full (small ones from an arena, a large one mapped on its own), and freed ones stop counting
// although an arena keeps their pages.
TEST(MemoryTrim, HeapBytesInUseFollowsWhatIsHeld) {
#if !defined(__GLIBC__)
  GTEST_SKIP() << "mallinfo2 is glibc's";
#endif
#if defined(POLYGRAD_ASAN_BUILD) || defined(POLYGRAD_TSAN_BUILD)
  EXPECT_FALSE(heap_bytes_in_use().has_value()) << "glibc's counts miss a sanitizer allocator's blocks";
  GTEST_SKIP() << "the sanitizer's allocator stands in for glibc's malloc, which mallinfo2 describes";
#endif
  const std::optional<uint64_t> base = heap_bytes_in_use();
  ASSERT_TRUE(base.has_value());
  constexpr size_t kBlocks = 32 * 1024, kBlock = 1024, kLarge = 64 << 20;
  std::vector<void*> blocks(kBlocks);
  for (void*& b : blocks) b = std::malloc(kBlock);
  void* large = std::malloc(kLarge);
  asm volatile("" : : "r"(blocks.data()), "r"(large) : "memory");  // the compiler may not drop them
  const uint64_t held = *heap_bytes_in_use();
  for (void* b : blocks) std::free(b);
  std::free(large);
  const uint64_t after = *heap_bytes_in_use();
  // Each block costs its size plus a header of a few words; the test's own vector is 256 KiB.
  const uint64_t kept = kBlocks * kBlock + kLarge;
  EXPECT_GE(held, *base + kept);
  EXPECT_LE(held, *base + kept + kBlocks * 32 + (1 << 20));
  EXPECT_LE(after + kept - (1 << 20), held);
}

TEST(Options, RejectsMalformedListenAndZeroLimits) {
  ServerOptions o;
  o.listen = "no-port";
  EXPECT_EQ(validate(o).code(), absl::StatusCode::kInvalidArgument);
  o = ServerOptions();
  o.limits.max_rank = 0;
  EXPECT_EQ(validate(o).code(), absl::StatusCode::kInvalidArgument);
  o = ServerOptions();
  o.listen.clear();
  o.unix_socket.clear();
  EXPECT_EQ(validate(o).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(validate(ServerOptions()).ok());
}

TEST(Log, TextKeepsOneLinePerEvent) {
  Logger log(LogLevel::Info, LogFormat::Text);
  std::string line = log.format(LogLevel::Warning, "", "request failed",
                                {{"method", "Realize"}, {"error", "node 7 (ADD): bad\nthing \"x\""}});
  EXPECT_EQ(line, "warning \"request failed\" method=Realize error=\"node 7 (ADD): bad\\nthing \\\"x\\\"\"\n");
}

TEST(Log, JsonEscapesControlCharacters) {
  Logger log(LogLevel::Info, LogFormat::Json);
  std::string line = log.format(LogLevel::Error, "2024-01-01T00:00:00.000Z", "x", {{"k", "a\"b\\c\n\x01"}});
  EXPECT_EQ(line,
            "{\"time\":\"2024-01-01T00:00:00.000Z\",\"level\":\"error\",\"msg\":\"x\",\"k\":\"a\\\"b\\\\c\\n\\u0001\"}\n");
}

TEST(Bounded, CutsLongTextAndSaysHowLongItWas) {
  EXPECT_EQ(bounded("short"), "short");
  EXPECT_EQ(bounded(std::string(64, 'a')), std::string(64, 'a'));
  EXPECT_EQ(bounded(std::string(65, 'a')), std::string(64, 'a') + "...(65 bytes)");
  // A cut never ends inside a UTF-8 sequence: "é" is two bytes, the second a continuation byte.
  EXPECT_EQ(bounded("abc\xc3\xa9xyz", 4), "abc...(8 bytes)");
  EXPECT_EQ(bounded("abc\xc3\xa9xyz", 5), "abc\xc3\xa9...(8 bytes)");
}

TEST(Log, FieldValuesAreBounded) {
  Logger log(LogLevel::Info, LogFormat::Text);
  const std::string huge(1 << 20, 'x');
  std::string line = log.format(LogLevel::Warning, "", "request failed", {{"session", huge}});
  EXPECT_LT(line.size(), kMaxMessageBytes + 100);
  EXPECT_NE(line.find("...(1048576 bytes)"), std::string::npos);
  EXPECT_LT(Logger(LogLevel::Info, LogFormat::Json).format(LogLevel::Info, "", "x", {{"k", huge}}).size(),
            kMaxMessageBytes + 100);
  // A status message reaching a client is bounded the same way.
  grpc::Status s = to_grpc_status(absl::InvalidArgumentError(huge));
  EXPECT_LE(s.error_message().size(), kMaxMessageBytes + 32);
}

TEST(Log, LevelsFilterAndSinkReceivesLines) {
  std::vector<std::string> lines;
  Logger log(LogLevel::Warning, LogFormat::Text, [&](std::string_view l) { lines.emplace_back(l); });
  log.info("hidden");
  log.error("shown", {{"session", "abc"}});
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("error shown session=abc"), std::string::npos) << lines[0];
  EXPECT_EQ(parse_log_level("debug").value(), LogLevel::Debug);
  EXPECT_FALSE(parse_log_level("loud").ok());
  EXPECT_EQ(parse_log_format("json").value(), LogFormat::Json);
  EXPECT_FALSE(parse_log_format("xml").ok());
}

TEST(Status, MapsCodesOneToOne) {
  EXPECT_EQ(to_grpc_status(absl::OkStatus()).error_code(), grpc::StatusCode::OK);
  grpc::Status s = to_grpc_status(absl::NotFoundError("handle 9"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "handle 9");
  EXPECT_EQ(to_grpc_code(absl::StatusCode::kResourceExhausted), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(to_grpc_code(absl::StatusCode::kFailedPrecondition), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(code_name(absl::StatusCode::kInvalidArgument), "INVALID_ARGUMENT");
}

TEST(Decode, DTypeTableRoundTrips) {
  for (int w = v1::BOOL; w <= v1::FLOAT64; ++w) {
    std::optional<DType> core = from_wire(static_cast<v1::DType>(w));
    ASSERT_TRUE(core.has_value()) << w;
    EXPECT_EQ(to_wire(*core), w);
  }
  EXPECT_FALSE(from_wire(v1::DTYPE_UNSPECIFIED).has_value());
  EXPECT_EQ(from_wire(v1::FLOAT32), DType::Float32);
}

// ---- errors ---------------------------------------------------------------------------------

TEST(Decode, ShapeLimitsNameTheLimit) {
  Limits l;
  l.max_rank = 2;
  l.max_elements = 100;
  std::vector<int64_t> ok = {10, 10};
  EXPECT_TRUE(check_shape(ok, l, "shape").ok());
  std::vector<int64_t> deep = {1, 1, 1};
  absl::Status s = check_shape(deep, l, "shape");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("max_rank (2)"), absl::string_view::npos) << s;
  std::vector<int64_t> big = {11, 10};
  s = check_shape(big, l, "shape");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("max_elements (100)"), absl::string_view::npos) << s;
  std::vector<int64_t> huge = {int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_EQ(check_shape(huge, l, "shape").code(), absl::StatusCode::kResourceExhausted);
  std::vector<int64_t> negative = {-1};
  EXPECT_EQ(check_shape(negative, l, "shape").code(), absl::StatusCode::kInvalidArgument);
}

// The scatter ops' decoding: NLL_LOSS's optional weight, and the index-by-position grid held to
// max_elements.
class NoNodes : public NodeResolver {
 public:
  const UOpRef* find_node(uint64_t) const override { return nullptr; }
  absl::StatusOr<BufferPtr> find_handle(uint64_t h) const override { return absl::NotFoundError(absl::StrCat(h)); }
};

v1::Node const_node(uint64_t id, v1::DType dt, std::vector<int64_t> shape) {
  v1::Node n;
  n.set_id(id);
  n.set_op(v1::CONST);
  n.set_dtype(dt);
  n.mutable_constant()->set_int_value(1);
  for (int64_t d : shape) n.mutable_constant()->add_shape(d);
  return n;
}

v1::Node composite_node(uint64_t id, v1::Op op, std::vector<uint64_t> src) {
  v1::Node n;
  n.set_id(id);
  n.set_op(op);
  for (uint64_t s : src) n.add_src(s);
  n.mutable_composite();
  return n;
}

TEST(Decode, ScatterOpsCheckSourcesAndWork) {
  auto engine = Engine::create({.threads = 1, .devices = {"cpu"}});
  ASSERT_TRUE(engine.ok()) << engine.status();
  Limits limits;
  limits.max_elements = 24;
  NoNodes none;
  google::protobuf::RepeatedPtrField<v1::Node> nodes;
  *nodes.Add() = const_node(1, v1::FLOAT32, {3, 4});
  *nodes.Add() = const_node(2, v1::INT32, {3, 2});
  *nodes.Add() = const_node(3, v1::FLOAT32, {3, 2});
  v1::Node scatter = composite_node(4, v1::SCATTER_REDUCE, {1, 2, 3});
  scatter.mutable_composite()->add_axes(1);
  scatter.mutable_composite()->set_mode("sum");
  *nodes.Add() = scatter;
  absl::StatusOr<DecodedNodes> ok = decode_nodes(nodes, none, **engine, limits);
  EXPECT_TRUE(ok.ok()) << ok.status();  // its grid is 3 x 2 x 4 = 24 elements: one too many below
  limits.max_elements = 23;
  absl::StatusOr<DecodedNodes> big = decode_nodes(nodes, none, **engine, limits);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(big.status().message().find("node 4 (SCATTER_REDUCE): its index-by-position comparisons"),
            absl::string_view::npos) << big.status();
  nodes.Mutable(3)->mutable_composite()->set_mode("max");
  limits.max_elements = 100;
  absl::StatusOr<DecodedNodes> mode = decode_nodes(nodes, none, **engine, limits);
  EXPECT_EQ(mode.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(mode.status().message().find("reduce must be"), absl::string_view::npos) << mode.status();

  // NLL_LOSS takes log-probabilities, targets and an optional weight.
  nodes.RemoveLast();
  *nodes.Add() = const_node(4, v1::INT32, {3});
  *nodes.Add() = const_node(5, v1::FLOAT32, {4});
  *nodes.Add() = composite_node(6, v1::NLL_LOSS, {1, 4});
  *nodes.Add() = composite_node(7, v1::NLL_LOSS, {1, 4, 5});
  nodes.Mutable(5)->mutable_composite()->set_mode("mean");
  nodes.Mutable(6)->mutable_composite()->set_mode("sum");
  absl::StatusOr<DecodedNodes> nll = decode_nodes(nodes, none, **engine, limits);
  EXPECT_TRUE(nll.ok()) << nll.status();
  nodes.Mutable(6)->add_src(5);
  absl::StatusOr<DecodedNodes> four = decode_nodes(nodes, none, **engine, limits);
  EXPECT_EQ(four.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(four.status().message().find("takes 2 to 3 source(s), got 4"), absl::string_view::npos) << four.status();
}

// The op table comes from the schema: every op the schema lists can be built, and every
// composite core can build is an op of the schema (a builder under a misspelt name would never run).
TEST(OpTable, TheSchemaAndCoresCompositesAgree) {
  EXPECT_TRUE(check_op_table().ok()) << check_op_table();
  for (std::string_view name : frontend::composite_names()) {
    v1::Op op = v1::OP_UNSPECIFIED;
    ASSERT_TRUE(v1::Op_Parse(std::string(name), &op)) << name << " is not an op of polygrad.proto";
    const OpSpec* spec = find_op(op);
    ASSERT_NE(spec, nullptr) << name;
    EXPECT_EQ(spec->build, v1::OpSchema::BUILD_COMPOSITE) << name;
    EXPECT_EQ(spec->composite, frontend::find_composite(name)) << name;
  }
  const OpSpec* add = find_op(v1::ADD);
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->core, Ops::ADD);
  EXPECT_EQ(add->arity, 2);
  const OpSpec* nll = find_op(v1::NLL_LOSS);
  ASSERT_NE(nll, nullptr);
  EXPECT_EQ(nll->max_arity, 3);
  EXPECT_EQ(nll->arg, v1::Node::kComposite);
  EXPECT_EQ(find_op(static_cast<v1::Op>(9999)), nullptr);
}

}  // namespace
}  // namespace polygrad::server
