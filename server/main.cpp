// polygradd: the polygrad compute daemon. Flags become a ServerOptions; SIGTERM/SIGINT drain
// gracefully (health NOT_SERVING, in-flight calls finish within --shutdown-grace) and exit 0.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "server/options.h"
#include "server/server.h"

namespace {

const polygrad::server::ServerOptions kDefaults;
const polygrad::server::Limits kLimits;

}  // namespace

ABSL_FLAG(std::string, listen, kDefaults.listen,
          "TCP address host:port to serve gRPC on; empty disables TCP. Non-loopback needs --tls_cert/--tls_key "
          "or --insecure_allow_remote.");
ABSL_FLAG(std::string, unix_socket, polygrad::server::default_unix_socket(),
          "Unix socket path to serve gRPC on; empty disables it.");
ABSL_FLAG(std::string, metrics_listen, kDefaults.metrics_listen,
          "host:port for the Prometheus /metrics endpoint; empty disables it.");
ABSL_FLAG(bool, insecure_allow_remote, false,
          "Allow a non-loopback --listen without TLS (plaintext; only on a trusted network).");
ABSL_FLAG(std::string, web_listen, "",
          "host:port to serve the same service over gRPC-Web (HTTP/1.1, for browsers); empty disables it. "
          "Non-loopback needs --tls_cert/--tls_key (the gRPC port's) or --insecure_allow_remote.");
ABSL_FLAG(std::string, web_allow_origin, "",
          "Comma-separated browser origins (scheme://host[:port]) allowed to call --web-listen across origins; "
          "empty: only pages served from the web port itself.");
ABSL_FLAG(std::string, web_playground, "",
          "A directory (examples/browser, with the browser build copied in) whose page the --web-listen port "
          "serves at /: a tensor playground with live loss plots. Empty: no page.");
ABSL_FLAG(std::string, cache_dir, polygrad::server::default_cache_dir().string(),
          "Kernel cache directory; empty keeps the cache in memory only.");
ABSL_FLAG(uint64_t, cache_max_bytes, kDefaults.cache_max_bytes,
          "Most bytes of kernel-cache entries on disk; least recently used entries are evicted. 0: no cap.");
ABSL_FLAG(std::string, cache_key_file, "",
          "File holding a secret (16 bytes or more): kernel-cache entries are signed with it (HMAC-SHA256) "
          "and only entries it signed are loaded. Daemons sharing a cache directory share the key.");
ABSL_FLAG(std::string, cache_remote, "",
          "A remote kernel-cache tier shared by a fleet, behind --cache-dir: http://host:port/prefix (WebDAV, "
          "bazel-remote), https://..., or redis://host:port/db. A local miss asks it before compiling; compiles "
          "are uploaded in the background. Needs --cache-remote-key-file.");
ABSL_FLAG(std::string, cache_remote_key_file, "",
          "File holding the secret (16 bytes or more) remote entries are signed with; only entries it signed load.");
ABSL_FLAG(bool, cache_remote_read_only, false, "Only read the remote tier; never upload to it.");
ABSL_FLAG(absl::Duration, cache_remote_timeout, absl::Milliseconds(500),
          "Longest one remote-tier operation may take (connect included).");
ABSL_FLAG(absl::Duration, cache_remote_breaker, absl::Seconds(30),
          "After a remote-tier failure, how long the tier is skipped before one request tries it again.");
ABSL_FLAG(uint64_t, host_cache_bytes, kDefaults.host_cache_bytes,
          "Most bytes of freed large host buffers kept for reuse (new memory costs a page fault per 4 KiB); 0: none.");
ABSL_FLAG(uint64_t, schedule_cache_entries, kDefaults.schedule_cache_entries,
          "Compiled realize programs kept in memory by graph structure, so a repeated graph over new "
          "buffers skips scheduling and code generation; least recently used evicted. 0 disables it.");
ABSL_FLAG(std::string, prewarm, "",
          "PrewarmManifest file (text format; binary if it ends in .pb) whose kernels are compiled at start. "
          "Health is NOT_SERVING until it finished.");
ABSL_FLAG(uint64_t, blob_max_bytes, kDefaults.blob_max_bytes,
          "Most bytes of content-addressed blobs kept in memory; least recently used ones are dropped.");
ABSL_FLAG(uint64_t, shm_max_bytes, kDefaults.shm_max_bytes,
          "Most bytes of shared-memory regions (Unix-socket clients) of all sessions together.");
ABSL_FLAG(std::string, log_level, "info", "Log level: debug, info, warning or error.");
ABSL_FLAG(std::string, log_format, "text", "Log format: text (key=value) or json (one object per line).");
ABSL_FLAG(std::string, compiler, "", "C compiler for CPU kernels; empty picks clang, then gcc, then cc.");
ABSL_FLAG(std::string, quick_compile, "on",
          "on: a new CPU kernel first runs a TinyCC build made in milliseconds while the C compiler builds the "
          "optimized one in the background (same results; kernels calling sin, cos or pow, or exp or log of float64, wait for the "
          "C compiler when it vectorises them); off: every new kernel waits for the C compiler.");
ABSL_FLAG(std::string, tune, "cached",
          "Tiling of CPU reduce kernels (matmul, convolution, reductions): off (the built-in heuristic), cached "
          "(use choices stored in the kernel cache by any daemon that shares it; else the heuristic), search (time "
          "the candidates of a kernel with no stored choice, then store the fastest: slow first realizes).");
ABSL_FLAG(std::string, devices, "",
          "Devices tensors may be placed on, comma-separated (cpu, cuda, cuda:0); empty: every device that exists. "
          "Naming a device that cannot be used fails at start with the reason.");
ABSL_FLAG(uint32_t, threads, 0, "Kernel worker threads; 0 uses every hardware thread.");
ABSL_FLAG(uint32_t, workers, kDefaults.workers, "Realize requests run at the same time.");
ABSL_FLAG(uint64_t, max_nodes_per_request, kLimits.max_nodes_per_request, "Most graph nodes in one request.");
ABSL_FLAG(uint64_t, max_rank, kLimits.max_rank, "Most dimensions of a tensor.");
ABSL_FLAG(uint64_t, max_elements, kLimits.max_elements, "Most elements of one tensor.");
ABSL_FLAG(uint64_t, max_work, kLimits.max_work,
          "Most multiply-adds of one convolution or pooling op (its output elements times its window).");
ABSL_FLAG(uint64_t, max_inline_bytes, kLimits.max_inline_bytes,
          "Most bytes of inline data: a BUFFER node's data, and result data inline in one Realize answer.");
ABSL_FLAG(uint64_t, max_message_bytes, kLimits.max_message_bytes, "gRPC receive limit per message, in bytes.");
ABSL_FLAG(uint64_t, max_sessions, kLimits.max_sessions, "Most sessions open at once.");
ABSL_FLAG(uint64_t, max_graph_depth, kLimits.max_graph_depth, "Longest chain of sources in one Realize's graph.");
ABSL_FLAG(uint64_t, max_session_buffers, kLimits.max_session_buffers,
          "Most buffers one session may hold (uploads, realized results); 0 is unlimited.");
ABSL_FLAG(uint64_t, max_session_bytes, kLimits.max_session_bytes,
          "Most device bytes one session may hold; 0 is unlimited.");
ABSL_FLAG(uint64_t, max_tenant_buffers, kLimits.max_tenant_buffers,
          "Most buffers all sessions of one tenant may hold together; 0 is unlimited.");
ABSL_FLAG(uint64_t, max_tenant_bytes, kLimits.max_tenant_bytes,
          "Most device bytes all sessions of one tenant may hold together; 0 is unlimited.");
ABSL_FLAG(uint64_t, max_tenant_sessions, kLimits.max_tenant_sessions,
          "Most sessions one tenant may have open; 0 is unlimited (--max-sessions still applies).");
ABSL_FLAG(uint64_t, max_requests_in_flight, kLimits.max_requests_in_flight,
          "Most requests handled at once across all clients; more are refused with RESOURCE_EXHAUSTED.");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain: serve --listen over TLS (with --tls-key).");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert.");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle: require and verify client certificates signed by it (mTLS).");
ABSL_FLAG(std::string, tokens_file, "",
          "File of '<token> <tenant> [admin]' lines: every RPC (but health and reflection) then needs "
          "'authorization: Bearer <token>'; admin RPCs need an admin token.");
ABSL_FLAG(absl::Duration, session_idle_timeout, absl::Seconds(600),
          "A session unused this long (and not held by a stream) is closed and its buffers freed; 0 disables.");
ABSL_FLAG(absl::Duration, memory_trim_interval, absl::Seconds(10),
          "How often memory the allocator keeps free is given back to the system (malloc_trim); 0 disables.");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(10),
          "On SIGTERM/SIGINT, how long in-flight calls may take before they are cancelled.");

namespace {

// absl flag names are identifiers: accept --unix-socket as --unix_socket.
std::vector<std::string> normalize_dashes(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& a = args[i];
    if (a == "--") break;
    if (a.size() < 3 || a[0] != '-') continue;
    const size_t start = a[1] == '-' ? 2 : 1;
    const size_t end = a.find('=') == std::string::npos ? a.size() : a.find('=');
    for (size_t j = start; j < end; ++j) {
      if (a[j] == '-') a[j] = '_';
    }
  }
  return args;
}

int fail(const std::string& message) {
  std::fprintf(stderr, "polygradd: %s\n", message.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // Debian builds Abseil without NDEBUG, so every absl::Mutex (gRPC's locks among them) keeps a
  // lock-order graph for deadlock detection: a few per cent of the daemon's time on a small
  // request. The sanitizer and unit-test builds keep it; the daemon does not pay for it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::SetProgramUsageMessage(
      "the polygrad tensor compiler daemon (gRPC polygrad.v1.Polygrad).\n"
      "Usage: polygradd [--flag=value ...]  (dashes and underscores in flag names are interchangeable)");
  // --help lists the flags defined in this file (absl's default looks for a file named after
  // the binary); --version prints the daemon's version.
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view file) { return absl::EndsWith(file, "server/main.cpp"); };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  usage.version_string = [] { return "polygradd " + std::string(polygrad::server::version()) + "\n"; };
  absl::SetFlagsUsageConfig(usage);
  std::vector<std::string> args = normalize_dashes(argc, argv);
  std::vector<char*> cargs;
  for (std::string& a : args) cargs.push_back(a.data());
  absl::ParseCommandLine(static_cast<int>(cargs.size()), cargs.data());

  using namespace polygrad::server;
  ServerOptions o;
  o.listen = absl::GetFlag(FLAGS_listen);
  o.unix_socket = absl::GetFlag(FLAGS_unix_socket);
  o.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  o.insecure_allow_remote = absl::GetFlag(FLAGS_insecure_allow_remote);
  o.web_listen = absl::GetFlag(FLAGS_web_listen);
  o.web_playground = absl::GetFlag(FLAGS_web_playground);
  for (absl::string_view origin : absl::StrSplit(absl::GetFlag(FLAGS_web_allow_origin), ',', absl::SkipWhitespace()))
    o.web_allow_origins.emplace_back(absl::StripAsciiWhitespace(origin));
  o.cache_dir = absl::GetFlag(FLAGS_cache_dir);
  o.cache_max_bytes = absl::GetFlag(FLAGS_cache_max_bytes);
  o.cache_key_file = absl::GetFlag(FLAGS_cache_key_file);
  o.cache_remote = absl::GetFlag(FLAGS_cache_remote);
  o.cache_remote_key_file = absl::GetFlag(FLAGS_cache_remote_key_file);
  o.cache_remote_read_only = absl::GetFlag(FLAGS_cache_remote_read_only);
  o.cache_remote_timeout =
      std::chrono::milliseconds(absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_cache_remote_timeout)));
  o.cache_remote_breaker =
      std::chrono::milliseconds(absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_cache_remote_breaker)));
  o.host_cache_bytes = absl::GetFlag(FLAGS_host_cache_bytes);
  o.schedule_cache_entries = absl::GetFlag(FLAGS_schedule_cache_entries);
  o.prewarm_file = absl::GetFlag(FLAGS_prewarm);
  o.blob_max_bytes = absl::GetFlag(FLAGS_blob_max_bytes);
  o.shm_max_bytes = absl::GetFlag(FLAGS_shm_max_bytes);
  o.compiler = absl::GetFlag(FLAGS_compiler);
  if (const std::string quick = absl::GetFlag(FLAGS_quick_compile); quick == "on" || quick == "off")
    o.quick_compile = quick == "on";
  else
    return fail(absl::StrCat("--quick-compile must be on or off, not '", quick, "'"));
  if (const std::string tune = absl::GetFlag(FLAGS_tune); tune == "off")
    o.tune = polygrad::TuneMode::Off;
  else if (tune == "cached")
    o.tune = polygrad::TuneMode::Cached;
  else if (tune == "search")
    o.tune = polygrad::TuneMode::Search;
  else
    return fail(absl::StrCat("--tune must be off, cached or search, not '", tune, "'"));
  for (absl::string_view d : absl::StrSplit(absl::GetFlag(FLAGS_devices), ',', absl::SkipWhitespace()))
    o.devices.emplace_back(absl::StripAsciiWhitespace(d));
  o.threads = absl::GetFlag(FLAGS_threads);
  o.workers = absl::GetFlag(FLAGS_workers);
  o.limits.max_nodes_per_request = absl::GetFlag(FLAGS_max_nodes_per_request);
  o.limits.max_rank = absl::GetFlag(FLAGS_max_rank);
  o.limits.max_elements = absl::GetFlag(FLAGS_max_elements);
  o.limits.max_work = absl::GetFlag(FLAGS_max_work);
  o.limits.max_inline_bytes = absl::GetFlag(FLAGS_max_inline_bytes);
  o.limits.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  o.limits.max_sessions = absl::GetFlag(FLAGS_max_sessions);
  o.limits.max_graph_depth = absl::GetFlag(FLAGS_max_graph_depth);
  o.limits.max_session_buffers = absl::GetFlag(FLAGS_max_session_buffers);
  o.limits.max_session_bytes = absl::GetFlag(FLAGS_max_session_bytes);
  o.limits.max_tenant_buffers = absl::GetFlag(FLAGS_max_tenant_buffers);
  o.limits.max_tenant_bytes = absl::GetFlag(FLAGS_max_tenant_bytes);
  o.limits.max_tenant_sessions = absl::GetFlag(FLAGS_max_tenant_sessions);
  o.limits.max_requests_in_flight = absl::GetFlag(FLAGS_max_requests_in_flight);
  o.security.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  o.security.tls_key = absl::GetFlag(FLAGS_tls_key);
  o.security.tls_client_ca = absl::GetFlag(FLAGS_tls_client_ca);
  o.security.tokens_file = absl::GetFlag(FLAGS_tokens_file);
  o.session_idle_timeout = std::chrono::seconds(absl::ToInt64Seconds(absl::GetFlag(FLAGS_session_idle_timeout)));
  o.memory_trim_interval =
      std::chrono::milliseconds(absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_memory_trim_interval)));
  absl::StatusOr<LogLevel> level = parse_log_level(absl::GetFlag(FLAGS_log_level));
  if (!level.ok()) return fail(std::string(level.status().message()));
  o.log_level = *level;
  absl::StatusOr<LogFormat> format = parse_log_format(absl::GetFlag(FLAGS_log_format));
  if (!format.ok()) return fail(std::string(format.status().message()));
  o.log_format = *format;
  const auto grace = std::chrono::milliseconds(absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_shutdown_grace)));

  // Block the stop signals before any thread starts, so every thread inherits the mask and
  // the main thread alone receives them with sigwait (no work in a signal handler).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  absl::StatusOr<std::unique_ptr<Server>> server = Server::start(std::move(o));
  if (!server.ok()) return fail(std::string(server.status().message()));

  int sig = 0;
  sigwait(&stop_signals, &sig);
  (*server)->logger().info("signal received", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
  (*server)->shutdown(grace);
  server->reset();
  return 0;
}
