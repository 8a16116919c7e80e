#include "server/web_gateway.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include <google/protobuf/descriptor.h>
#include <grpcpp/client_context.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/auth.h"
#include "server/bounded.h"
#include "server/status.h"

namespace polygrad::server {
namespace {

constexpr size_t kFrameHeader = 5;
constexpr unsigned char kTrailerFlag = 0x80;
constexpr unsigned char kCompressedFlag = 0x01;

// A frame's 5 bytes: the flag, then the payload's length big-endian.
std::string frame_header(unsigned char flag, size_t payload_bytes) {
  std::string out(1, static_cast<char>(flag));
  const auto n = static_cast<uint32_t>(payload_bytes);
  for (int shift : {24, 16, 8, 0}) out.push_back(static_cast<char>((n >> shift) & 0xff));
  return out;
}

std::string frame(unsigned char flag, std::string_view payload) {
  std::string out = frame_header(flag, payload.size());
  out.append(payload);
  return out;
}

// grpc-message is percent-encoded outside printable ASCII (and '%' itself), as gRPC specifies.
std::string percent_encoded(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (c >= 0x20 && c < 0x7f && c != '%') {
      out.push_back(static_cast<char>(c));
    } else {
      static constexpr char kHex[] = "0123456789ABCDEF";
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

// grpc-web-text bodies are base64, possibly several padded pieces one after another (a client
// or proxy may encode each chunk on its own): each piece is decoded by itself.
bool decode_text_body(std::string_view text, std::string& out) {
  out.clear();
  while (!text.empty()) {
    size_t end = text.find('=');
    if (end == std::string_view::npos) {
      end = text.size();
    } else {
      while (end < text.size() && text[end] == '=') ++end;
    }
    std::string piece;
    if (end % 4 != 0 || !absl::Base64Unescape(av(text.substr(0, end)), &piece)) return false;
    out += piece;
    text.remove_prefix(end);
  }
  return true;
}

// The largest body the port reads: one frame of max_message_bytes, as base64 in text mode.
uint64_t body_bound(uint64_t max_message_bytes, bool text) {
  const uint64_t binary = max_message_bytes + kFrameHeader;
  return text ? (binary + 2) / 3 * 4 : binary;
}

// "/polygrad.v1.Polygrad/Realize" -> the method's descriptor, for the daemon's own services only.
const google::protobuf::MethodDescriptor* find_method(std::string_view path) {
  if (path.size() < 2 || path[0] != '/' || path.size() > 256) return nullptr;
  const size_t slash = path.find('/', 1);
  if (slash == std::string_view::npos) return nullptr;
  const std::string service(path.substr(1, slash - 1));
  if (service != "polygrad.v1.Polygrad" && service != "polygrad.v1.PolygradAdmin") return nullptr;
  return google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(
      absl::StrCat(service, ".", av(path.substr(slash + 1))));
}

// grpc-timeout: 1 to 8 digits and a unit (Hours, Minutes, Seconds, milli, micro, nano).
bool parse_grpc_timeout(std::string_view v, std::chrono::nanoseconds& out) {
  if (v.size() < 2 || v.size() > 9) return false;
  int64_t n = 0;
  if (!absl::SimpleAtoi(av(v.substr(0, v.size() - 1)), &n) || n < 0) return false;
  switch (v.back()) {
    case 'H': out = std::chrono::hours(n); return true;
    case 'M': out = std::chrono::minutes(n); return true;
    case 'S': out = std::chrono::seconds(n); return true;
    case 'm': out = std::chrono::milliseconds(n); return true;
    case 'u': out = std::chrono::microseconds(n); return true;
    case 'n': out = std::chrono::nanoseconds(n); return true;
    default: return false;
  }
}

}  // namespace

std::string web_data_frame(std::string_view message) { return frame(0, message); }

std::string web_trailer_frame(int code, std::string_view message) {
  std::string t = absl::StrCat("grpc-status:", code, "\r\n");
  if (!message.empty()) absl::StrAppend(&t, "grpc-message:", percent_encoded(message), "\r\n");
  return frame(kTrailerFlag, t);
}

struct WebGateway::Impl {
  WebGatewayOptions options;
  std::unique_ptr<grpc::GenericStub> stub;  // over the gRPC server's in-process channel
  std::shared_ptr<TokenAuthProcessor> auth;
  Metrics* metrics = nullptr;
  MHD_Daemon* daemon = nullptr;
  bool stopped = false;
};

namespace {

using Impl = WebGateway::Impl;

// One forwarded call, owned by the streamed HTTP response that reads it. Every operation on the
// call is waited for before the next starts, so at most one is ever outstanding.
struct WebCall {
  Impl* gw = nullptr;
  std::string method_label;
  grpc::ClientContext ctx;
  grpc::CompletionQueue cq;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> rw;
  bool started = false;
  bool finished = false;  // Finish has returned the status
  bool ended = false;     // the trailer frame is in `out`
  bool text = false;      // grpc-web-text: each frame goes out as base64 of its own
  std::string out;        // bytes not yet handed to the HTTP response
  size_t pos = 0;

  bool wait() {
    void* tag = nullptr;
    bool ok = false;
    return cq.Next(&tag, &ok) && ok;
  }

  void begin(const std::string& path, std::string_view request) {
    rw = gw->stub->PrepareCall(&ctx, path, &cq);
    rw->StartCall(this);
    started = wait();
    if (!started) return;
    grpc::Slice slice(request.data(), request.size());
    grpc::ByteBuffer message(&slice, 1);
    rw->Write(message, this);
    if (!wait()) return;  // the server ended the call: Read fails and Finish says why
    rw->WritesDone(this);
    wait();
  }

  // Appends the next response message as a frame, or the status as the trailer frame.
  void pump() {
    if (started) {
      grpc::ByteBuffer message;
      rw->Read(&message, this);
      if (wait()) {  // the frame's header, then the message's slices straight after it
        std::vector<grpc::Slice> slices;
        (void)message.Dump(&slices);
        out = frame_header(0, message.Length());
        for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
        if (text) out = absl::Base64Escape(out);
        return;
      }
    }
    grpc::Status status;
    rw->Finish(&status, this);
    wait();
    finished = true;
    out = web_trailer_frame(static_cast<int>(status.error_code()), status.error_message());
    if (text) out = absl::Base64Escape(out);
    ended = true;
    gw->metrics->observe_web_request(method_label, static_cast<absl::StatusCode>(status.error_code()));
  }

  ~WebCall() {
    if (rw != nullptr && !finished) {  // the HTTP client went away first
      ctx.TryCancel();
      grpc::Status ignored;
      rw->Finish(&ignored, this);
      wait();
    }
    cq.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq.Next(&tag, &ok)) {
    }
  }
};

ssize_t read_call(void* cls, uint64_t, char* buf, size_t max) {
  auto* call = static_cast<WebCall*>(cls);
  while (call->pos == call->out.size()) {
    if (call->ended) return MHD_CONTENT_READER_END_OF_STREAM;
    call->out.clear();
    call->pos = 0;
    call->pump();
  }
  const size_t n = std::min(max, call->out.size() - call->pos);
  std::memcpy(buf, call->out.data() + call->pos, n);
  call->pos += n;
  return static_cast<ssize_t>(n);
}

void free_call(void* cls) { delete static_cast<WebCall*>(cls); }

// One HTTP request, from its headers to its response.
struct Request {
  std::string path;
  const google::protobuf::MethodDescriptor* method = nullptr;  // null: not one the port serves
  std::string label;                                          // the method's metrics label
  std::string body;
  uint64_t received = 0;     // body bytes so far, kept or not
  std::string allow_origin;  // echoed in Access-Control-Allow-Origin; empty: no CORS headers
  bool text = false;         // application/grpc-web-text: base64 both ways
  bool answered = false;
};

std::string header(MHD_Connection* c, const char* name) {
  const char* v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
  return v == nullptr ? std::string() : std::string(v);
}

MHD_Result queue(MHD_Connection* c, unsigned status, MHD_Response* r, const Request& req) {
  if (!req.allow_origin.empty()) {
    MHD_add_response_header(r, "Access-Control-Allow-Origin", req.allow_origin.c_str());
    MHD_add_response_header(r, "Vary", "Origin");
    MHD_add_response_header(r, "Access-Control-Expose-Headers", "grpc-status, grpc-message");
  }
  const MHD_Result ret = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ret;
}

MHD_Result plain(MHD_Connection* c, unsigned status, std::string_view text, Request& req) {
  req.answered = true;
  MHD_Response* r = MHD_create_response_from_buffer(text.size(), const_cast<char*>(text.data()), MHD_RESPMEM_MUST_COPY);
  MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
  return queue(c, status, r, req);
}

const char* content_type(const Request& req) {
  return req.text ? "application/grpc-web-text+proto" : "application/grpc-web+proto";
}

// A gRPC status without a call: HTTP 200, the status in the body's trailer frame.
MHD_Result grpc_status(Impl& gw, MHD_Connection* c, Request& req, const std::string& method_label, absl::StatusCode code,
                       std::string_view message) {
  req.answered = true;
  gw.metrics->observe_web_request(method_label, code);
  std::string body = web_trailer_frame(static_cast<int>(code), message);
  if (req.text) body = absl::Base64Escape(body);
  MHD_Response* r = MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  MHD_add_response_header(r, "Content-Type", content_type(req));
  return queue(c, MHD_HTTP_OK, r, req);
}

// Whether a browser page at `origin` may call: listed, or this port's own (the Host it asked).
bool origin_allowed(const Impl& gw, MHD_Connection* c, const std::string& origin) {
  if (std::find(gw.options.allow_origins.begin(), gw.options.allow_origins.end(), origin) !=
      gw.options.allow_origins.end())
    return true;
  const std::string host = header(c, "Host");
  const bool tls = !gw.options.tls_cert_pem.empty();
  return !host.empty() && origin == absl::StrCat(tls ? "https://" : "http://", host);
}

// The playground's files: a fixed table from URL to file name, so no request names a path.
MHD_Result playground_file(const Impl& gw, MHD_Connection* c, Request& req) {
  static const std::map<std::string, std::pair<const char*, const char*>> kFiles = {
      {"/", {"index.html", "text/html; charset=utf-8"}},
      {"/index.html", {"index.html", "text/html; charset=utf-8"}},
      {"/playground.js", {"playground.js", "text/javascript; charset=utf-8"}},
      {"/polygrad.browser.js", {"polygrad.browser.js", "text/javascript; charset=utf-8"}},
  };
  auto it = kFiles.find(req.path);
  if (it == kFiles.end()) return plain(c, MHD_HTTP_NOT_FOUND, "not found", req);
  std::ifstream in(gw.options.playground_dir / it->second.first, std::ios::binary);
  if (!in) {
    return plain(c, MHD_HTTP_NOT_FOUND, absl::StrCat(it->second.first, " is missing from the playground directory"),
                 req);
  }
  std::ostringstream text;
  text << in.rdbuf();
  const std::string body = text.str();
  req.answered = true;
  MHD_Response* r = MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  MHD_add_response_header(r, "Content-Type", it->second.second);
  MHD_add_response_header(r, "Cache-Control", "no-cache");
  return queue(c, MHD_HTTP_OK, r, req);
}

MHD_Result handle(void* cls, MHD_Connection* c, const char* url, const char* method, const char*,
                  const char* upload_data, size_t* upload_data_size, void** con_cls) {
  Impl& gw = *static_cast<Impl*>(cls);
  auto* req = static_cast<Request*>(*con_cls);
  if (req == nullptr) {  // the headers: decide now whether to read a body at all
    req = new Request;
    *con_cls = req;
    req->path = url == nullptr ? "" : url;
    req->method = find_method(req->path);
    req->label = req->method == nullptr ? "unknown" : req->method->service()->name() + "." + req->method->name();
    const std::string origin = header(c, "Origin");
    if (!origin.empty()) {
      if (!origin_allowed(gw, c, origin)) {
        return plain(c, MHD_HTTP_FORBIDDEN,
                     absl::StrCat("origin ", bounded(origin), " is not allowed (polygradd --web-allow-origin)"), *req);
      }
      req->allow_origin = origin;
    }
    if (std::strcmp(method, "OPTIONS") == 0) {  // a CORS preflight
      req->answered = true;
      MHD_Response* r = MHD_create_response_from_buffer(0, nullptr, MHD_RESPMEM_PERSISTENT);
      MHD_add_response_header(r, "Access-Control-Allow-Methods", "POST, OPTIONS");
      MHD_add_response_header(r, "Access-Control-Allow-Headers",
                              "authorization, content-type, grpc-timeout, x-grpc-web, x-user-agent");
      MHD_add_response_header(r, "Access-Control-Max-Age", "600");
      return queue(c, MHD_HTTP_NO_CONTENT, r, *req);
    }
    if ((std::strcmp(method, "GET") == 0 || std::strcmp(method, "HEAD") == 0) && !gw.options.playground_dir.empty()) {
      return playground_file(gw, c, *req);
    }
    if (std::strcmp(method, "POST") != 0) {
      return plain(c, MHD_HTTP_METHOD_NOT_ALLOWED, "gRPC-Web calls are POST requests", *req);
    }
    const std::string type = absl::AsciiStrToLower(header(c, "Content-Type"));
    req->text = type == "application/grpc-web-text+proto" || type == "application/grpc-web-text";
    if (type != "application/grpc-web+proto" && type != "application/grpc-web" && !req->text) {
      return plain(c, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE,
                   absl::StrCat("content type ", bounded(type),
                                " is not served: send application/grpc-web+proto (binary frames) or "
                                "application/grpc-web-text+proto (base64)"),
                   *req);
    }
    uint64_t length = 0;
    if (absl::SimpleAtoi(header(c, "Content-Length"), &length) &&
        length > body_bound(gw.options.max_message_bytes, req->text)) {
      return grpc_status(gw, c, *req, req->label, absl::StatusCode::kResourceExhausted,
                         absl::StrCat("request body of ", length, " bytes exceeds max_message_bytes ",
                                      gw.options.max_message_bytes));
    }
    return MHD_YES;
  }
  if (req->answered) {  // refused above: whatever body follows is not read
    *upload_data_size = 0;
    return MHD_YES;
  }
  const google::protobuf::MethodDescriptor* m = req->method;
  const std::string& label = req->label;
  const uint64_t bound = body_bound(gw.options.max_message_bytes, req->text);
  const auto too_large = [&] {
    return grpc_status(gw, c, *req, label, absl::StatusCode::kResourceExhausted,
                       absl::StrCat("request body exceeds max_message_bytes ", gw.options.max_message_bytes));
  };
  if (*upload_data_size > 0) {
    // Past the bound the body is read and dropped, so that the client, still sending, gets the
    // answer rather than a reset connection; past four times the bound it is answered at once.
    req->received += *upload_data_size;
    if (req->received > 4 * bound) {
      *upload_data_size = 0;
      return too_large();
    }
    if (req->received <= bound) {
      req->body.append(upload_data, *upload_data_size);
    } else {
      std::string().swap(req->body);
    }
    *upload_data_size = 0;
    return MHD_YES;
  }

  // The whole request is here.
  if (req->received > bound) return too_large();
  if (m == nullptr) {
    return grpc_status(gw, c, *req, label, absl::StatusCode::kUnimplemented,
                       absl::StrCat("no method ", bounded(req->path), " on the gRPC-Web port"));
  }
  if (m->client_streaming()) {
    return grpc_status(gw, c, *req, label, absl::StatusCode::kUnimplemented,
                       absl::StrCat(m->name(), " streams requests, which gRPC-Web cannot; use the gRPC port"));
  }
  if (req->text) {
    std::string decoded;
    if (!decode_text_body(req->body, decoded)) {
      return grpc_status(gw, c, *req, label, absl::StatusCode::kInvalidArgument,
                         "the request body is not base64 (application/grpc-web-text)");
    }
    req->body = std::move(decoded);
  }
  const std::string& body = req->body;
  if (body.size() < kFrameHeader || (static_cast<unsigned char>(body[0]) & kTrailerFlag) != 0) {
    return grpc_status(gw, c, *req, label, absl::StatusCode::kInvalidArgument,
                       "the request body is not one gRPC-Web message frame");
  }
  if ((static_cast<unsigned char>(body[0]) & kCompressedFlag) != 0) {
    return grpc_status(gw, c, *req, label, absl::StatusCode::kUnimplemented, "compressed messages are not accepted");
  }
  uint64_t n = 0;
  for (int i = 1; i < 5; ++i) n = (n << 8) | static_cast<unsigned char>(body[i]);
  if (n != body.size() - kFrameHeader) {
    return grpc_status(gw, c, *req, label, absl::StatusCode::kInvalidArgument,
                       absl::StrCat("the request frame says ", n, " bytes but ", body.size() - kFrameHeader,
                                    " follow: send exactly one message"));
  }

  // Bearer tokens: the gRPC port's own check.
  std::vector<std::string> authorization;
  MHD_get_connection_values(
      c, MHD_HEADER_KIND,
      [](void* out, MHD_ValueKind, const char* key, const char* value) -> MHD_Result {
        if (key != nullptr && value != nullptr && absl::EqualsIgnoreCase(key, "authorization"))
          static_cast<std::vector<std::string>*>(out)->emplace_back(value);
        return MHD_YES;
      },
      &authorization);
  if (gw.auth != nullptr) {
    grpc::AuthMetadataProcessor::InputMetadata md;
    md.emplace(":path", grpc::string_ref(req->path));
    for (const std::string& a : authorization) md.emplace("authorization", grpc::string_ref(a));
    grpc::Status s = gw.auth->Process(md, nullptr, nullptr, nullptr);
    if (!s.ok()) {
      return grpc_status(gw, c, *req, label, static_cast<absl::StatusCode>(s.error_code()), s.error_message());
    }
  }

  auto call = std::make_unique<WebCall>();
  call->gw = &gw;
  call->method_label = label;
  call->text = req->text;
  if (authorization.size() == 1) call->ctx.AddMetadata("authorization", authorization[0]);
  if (const std::string t = header(c, "grpc-timeout"); !t.empty()) {
    std::chrono::nanoseconds timeout{};
    if (!parse_grpc_timeout(t, timeout)) {
      return grpc_status(gw, c, *req, label, absl::StatusCode::kInvalidArgument,
                         absl::StrCat("grpc-timeout ", bounded(t), " is not 1-8 digits and a unit (H M S m u n)"));
    }
    call->ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  }
  call->begin(req->path, std::string_view(body).substr(kFrameHeader));
  req->answered = true;
  req->body.clear();
  req->body.shrink_to_fit();
  MHD_Response* r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, read_call, call.get(), free_call);
  if (r == nullptr) return MHD_NO;
  call.release();  // the response owns it now: free_call
  MHD_add_response_header(r, "Content-Type", content_type(*req));
  return queue(c, MHD_HTTP_OK, r, *req);
}

void completed(void*, MHD_Connection*, void** con_cls, MHD_RequestTerminationCode) {
  delete static_cast<Request*>(*con_cls);
  *con_cls = nullptr;
}

// host:port (or [v6]:port) as a socket address to bind.
absl::StatusOr<sockaddr_storage> bind_address(const std::string& listen, bool& v6) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return absl::InvalidArgumentError(absl::StrCat("--web-listen \"", listen, "\" is not host:port"));
  std::string host = listen.substr(0, colon), port = listen.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &res) != 0 || res == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("--web-listen \"", listen, "\": cannot resolve the host"));
  }
  sockaddr_storage out{};
  std::memcpy(&out, res->ai_addr, res->ai_addrlen);
  v6 = res->ai_family == AF_INET6;
  freeaddrinfo(res);
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<WebGateway>> WebGateway::start(WebGatewayOptions options,
                                                               std::shared_ptr<grpc::Channel> channel,
                                                               std::shared_ptr<TokenAuthProcessor> auth,
                                                               Metrics& metrics) {
  std::unique_ptr<WebGateway> gw(new WebGateway);
  gw->impl_ = std::make_unique<Impl>();
  Impl& impl = *gw->impl_;
  impl.options = std::move(options);
  impl.stub = std::make_unique<grpc::GenericStub>(std::move(channel));
  impl.auth = std::move(auth);
  impl.metrics = &metrics;
  bool v6 = false;
  absl::StatusOr<sockaddr_storage> addr = bind_address(impl.options.listen, v6);
  if (!addr.ok()) return addr.status();
  const bool tls = !impl.options.tls_cert_pem.empty();
  if (tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
    return absl::FailedPreconditionError("--web-listen with TLS: this libmicrohttpd was built without TLS");
  }
  unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC;
  if (v6) flags |= MHD_USE_IPv6;
  if (tls) flags |= MHD_USE_TLS;
  const auto timeout = static_cast<unsigned>(impl.options.idle_timeout.count());
  if (tls) {
    impl.daemon = MHD_start_daemon(
        flags, 0, nullptr, nullptr, handle, &impl, MHD_OPTION_SOCK_ADDR, reinterpret_cast<const sockaddr*>(&*addr),
        MHD_OPTION_CONNECTION_LIMIT, impl.options.max_connections, MHD_OPTION_CONNECTION_TIMEOUT, timeout,
        MHD_OPTION_NOTIFY_COMPLETED, completed, nullptr, MHD_OPTION_HTTPS_MEM_KEY, impl.options.tls_key_pem.c_str(),
        MHD_OPTION_HTTPS_MEM_CERT, impl.options.tls_cert_pem.c_str(), MHD_OPTION_END);
  } else {
    impl.daemon = MHD_start_daemon(flags, 0, nullptr, nullptr, handle, &impl, MHD_OPTION_SOCK_ADDR,
                                   reinterpret_cast<const sockaddr*>(&*addr), MHD_OPTION_CONNECTION_LIMIT,
                                   impl.options.max_connections, MHD_OPTION_CONNECTION_TIMEOUT, timeout,
                                   MHD_OPTION_NOTIFY_COMPLETED, completed, nullptr, MHD_OPTION_END);
  }
  if (impl.daemon == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on --web-listen ", impl.options.listen, " (address in use or not permitted?)"));
  }
  const MHD_DaemonInfo* info = MHD_get_daemon_info(impl.daemon, MHD_DAEMON_INFO_BIND_PORT);
  gw->port_ = info == nullptr ? 0 : info->port;
  return gw;
}

void WebGateway::stop() {
  if (impl_ == nullptr || impl_->stopped) return;
  impl_->stopped = true;
  MHD_stop_daemon(impl_->daemon);
  impl_->daemon = nullptr;
}

WebGateway::~WebGateway() { stop(); }

}  // namespace polygrad::server
