// Typed settings of the daemon. main() fills a ServerOptions from flags; tests construct one
// directly (port 0, a temporary cache dir). Every field has the production default.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/engine/engine.h"
#include "server/log.h"

namespace polygrad::server {

// Bounds on what one client may ask for (DESIGN §4). Exceeding one is RESOURCE_EXHAUSTED with
// the limit's name and value.
struct Limits {
  uint64_t max_nodes_per_request = 100000;
  uint64_t max_rank = 16;
  uint64_t max_elements = uint64_t{1} << 31;  // per tensor
  // Per composite: the multiply-adds (or comparisons) of a window op (convolution, pooling), whose
  // output-by-window grid is computed, never allocated. 2^36 is a ResNet layer at batch 32 (2^32)
  // sixteen times over; at 2 cores' speed, tens of seconds.
  uint64_t max_work = uint64_t{1} << 36;
  uint64_t max_inline_bytes = uint64_t{1} << 20;  // inline BUFFER data, and inline results per response
  uint64_t max_message_bytes = uint64_t{64} << 20;  // gRPC receive limit
  uint64_t max_sessions = 1024;
  uint64_t max_pending_uploads = 64;  // interleaved uploads per Execute stream
  uint64_t chunk_bytes = uint64_t{1} << 20;  // default Download chunk size
  // Quotas (server/quota.h). 0 means unlimited for the per-session and per-tenant ones.
  uint64_t max_graph_depth = 10000;              // longest src chain of one realize's graph
  uint64_t max_session_buffers = 0;              // buffers one session may hold
  uint64_t max_session_bytes = 0;                // device bytes one session may hold
  uint64_t max_tenant_buffers = 0;               // buffers all sessions of one tenant may hold
  uint64_t max_tenant_bytes = 0;                 // device bytes all sessions of one tenant may hold
  uint64_t max_tenant_sessions = 0;              // sessions one tenant may have open
  uint64_t max_requests_in_flight = 1024;        // requests being handled at once, all clients
};

// Transport security (server/tls.h) and bearer-token authentication (server/auth.h).
struct SecurityOptions {
  std::filesystem::path tls_cert;       // PEM certificate chain; with tls_key enables TLS on --listen
  std::filesystem::path tls_key;        // PEM private key
  std::filesystem::path tls_client_ca;  // PEM CA bundle; set: client certificates required (mTLS)
  std::filesystem::path tokens_file;    // "token tenant [admin]" lines; set: every RPC needs a token
  bool tls() const { return !tls_cert.empty(); }
};

struct ServerOptions {
  std::string listen = "127.0.0.1:50051";      // host:port; empty disables TCP; port 0 picks one
  std::string unix_socket;                     // path; empty disables
  std::string metrics_listen = "127.0.0.1:9464";  // host:port; empty disables /metrics
  bool insecure_allow_remote = false;          // allow a non-loopback --listen without TLS
  // gRPC-Web (server/web_gateway.h): host:port, empty disables it; TLS (--tls-cert/--tls-key) off
  // loopback as on --listen; browser origins allowed to call it (exact; none by default).
  std::string web_listen;
  std::vector<std::string> web_allow_origins;
  std::filesystem::path web_playground;  // a directory whose index.html the web port serves at /
  std::filesystem::path cache_dir;             // kernel cache root; empty: memory only
  uint64_t cache_max_bytes = uint64_t{1} << 30;  // disk tier cap (LRU eviction); 0: no cap
  std::filesystem::path cache_key_file;        // secret that signs and checks cache entries; empty: none
  // The remote tier (core/cache/remote_tier.h): URL (empty: none), its signing secret (required
  // with a URL), read-only, per-operation timeout, and how long a failure turns the tier off.
  std::string cache_remote;
  std::filesystem::path cache_remote_key_file;
  bool cache_remote_read_only = false;
  std::chrono::milliseconds cache_remote_timeout{500};
  std::chrono::milliseconds cache_remote_breaker{30000};
  uint64_t host_cache_bytes = uint64_t{1} << 30;  // freed host blocks kept for reuse (runtime/host_allocator.h)
  uint64_t schedule_cache_entries = 1024;      // compiled realize programs kept in memory (LRU); 0: off
  std::filesystem::path prewarm_file;          // PrewarmManifest compiled at start; empty: none
  uint64_t blob_max_bytes = uint64_t{2} << 30;  // content-addressed blobs kept in memory (LRU)
  uint64_t shm_max_bytes = uint64_t{8} << 30;   // shared-memory regions of all sessions together
  std::string compiler;                        // C compiler; empty: auto
  bool quick_compile = true;                   // --quick-compile (EngineOptions::quick_compile)
  TuneMode tune = TuneMode::Cached;            // --tune (EngineOptions::tune, core/engine/tuning.h)
  std::vector<std::string> devices;            // --devices: "cpu", "cuda:0"; empty: every device that exists
  unsigned threads = 0;                        // engine kernel threads; 0: hardware concurrency
  unsigned workers = 4;                        // concurrent realize requests
  std::chrono::seconds session_idle_timeout{600};
  std::chrono::milliseconds reaper_interval{1000};
  std::chrono::milliseconds memory_trim_interval{10000};  // free allocator memory back to the OS; 0: never
  Limits limits;
  SecurityOptions security;

  LogLevel log_level = LogLevel::Info;
  LogFormat log_format = LogFormat::Text;
  LogSink log_sink;  // empty: stderr
};

// The documented defaults that depend on the environment.
std::string default_unix_socket();      // $XDG_RUNTIME_DIR/polygradd.sock or /tmp/polygradd-<uid>.sock
std::filesystem::path default_cache_dir();  // $XDG_CACHE_HOME/polygrad or ~/.cache/polygrad

// True for 127.0.0.0/8, ::1 and "localhost" (host:port or [v6]:port form).
bool is_loopback_address(std::string_view host_port);

// The secret of --cache-key-file: the file's bytes less trailing whitespace. INVALID_ARGUMENT
// naming the file when it cannot be read or holds fewer than kMinCacheKeyBytes (an HMAC is only as
// strong as its key); it is never echoed.
inline constexpr size_t kMinCacheKeyBytes = 16;
// `flag` names the option in messages.
absl::StatusOr<std::string> read_cache_key(const std::filesystem::path& path, const char* flag = "--cache-key-file");

// Checks a configuration before anything binds: non-loopback TCP needs TLS or
// insecure_allow_remote, tokens never travel in plaintext off the host, limits must be positive.
absl::Status validate(const ServerOptions& options);

}  // namespace polygrad::server
