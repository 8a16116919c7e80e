// The gRPC-Web port (server/web_gateway.h) in process, so the sanitizer builds see its call
// lifecycle: framing, a unary call, a server-streaming call, and an HTTP client that goes away in
// the middle of a stream (its gRPC call is cancelled, nothing is left, the port keeps serving).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "server/server.h"
#include "server/web_gateway.h"
#include "test_util.h"

namespace polygrad::server {
namespace {

using namespace polygrad::server::testing;  // NOLINT
namespace fs = std::filesystem;

TEST(WebFramingTest, FramesCarryALengthAndTrailersArePercentEncoded) {
  EXPECT_EQ(web_data_frame("abc"), std::string("\0\0\0\0\3abc", 8));
  EXPECT_EQ(web_trailer_frame(0, ""), std::string("\x80\0\0\0\x0f", 5) + "grpc-status:0\r\n");
  const std::string t = web_trailer_frame(3, "bad 100%\r\nnode \xc3\xa9");
  EXPECT_EQ(t.substr(5), "grpc-status:3\r\ngrpc-message:bad 100%25%0D%0Anode %C3%A9\r\n");
  EXPECT_EQ(static_cast<unsigned char>(t[4]), t.size() - 5);
}

// A connection to 127.0.0.1:port.
int connect_to(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) ADD_FAILURE() << "cannot connect to " << port;
  return fd;
}

void send_all(int fd, const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    ASSERT_GT(n, 0);
    off += static_cast<size_t>(n);
  }
}

std::string request(const std::string& method, const google::protobuf::Message& message) {
  const std::string body = web_data_frame(message.SerializeAsString());
  return "POST /polygrad.v1.Polygrad/" + method + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" +
         "Content-Type: application/grpc-web+proto\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
         body;
}

// The body of a whole HTTP/1.1 response read to EOF, chunked transfer coding undone.
std::string body_of(const std::string& response) {
  const size_t head = response.find("\r\n\r\n");
  if (head == std::string::npos) return {};
  std::string out;
  size_t pos = head + 4;
  if (response.substr(0, head).find("chunked") == std::string::npos) return response.substr(pos);
  while (pos < response.size()) {
    const size_t eol = response.find("\r\n", pos);
    const size_t n = std::strtoul(response.substr(pos, eol - pos).c_str(), nullptr, 16);
    if (n == 0) break;
    out += response.substr(eol + 2, n);
    pos = eol + 2 + n + 2;
  }
  return out;
}

// The length a frame header at `pos` gives.
size_t frame_length(const std::string& s, size_t pos) {
  size_t n = 0;
  for (size_t i = 1; i < 5; ++i) n = (n << 8) | static_cast<unsigned char>(s[pos + i]);
  return n;
}

std::string call(int port, const std::string& method, const google::protobuf::Message& message) {
  const int fd = connect_to(port);
  send_all(fd, request(method, message));
  std::string response;
  char buf[65536];
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) response.append(buf, static_cast<size_t>(n));
  close(fd);
  return body_of(response);
}

class WebGatewayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/polygrad-web-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.unix_socket.clear();
    o.metrics_listen.clear();
    o.web_listen = "127.0.0.1:0";
    o.cache_dir = dir_ / "cache";
    o.log_sink = [](std::string_view) {};
    absl::StatusOr<std::unique_ptr<Server>> s = Server::start(std::move(o));
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
    ASSERT_GT(server_->web_port(), 0);
    stub_ = make_stub(server_->tcp_address());
  }
  void TearDown() override {
    server_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // A Download, in 64 KiB chunks, of a float32 tensor of `shape` realized in session `sid` (over gRPC).
  v1::DownloadRequest download_of_const(const std::string& sid, std::vector<int64_t> shape) {
    v1::RealizeRequest req;
    req.set_session_id(sid);
    *req.add_nodes() = float_const(1, 2.0, std::move(shape));
    req.add_outputs(1);
    v1::RealizeResponse resp;
    grpc::ClientContext ctx;
    EXPECT_TRUE(stub_->Realize(&ctx, req, &resp).ok());
    v1::DownloadRequest down;
    down.set_session_id(sid);
    down.set_handle(resp.results_size() ? resp.results(0).handle() : 0);
    down.set_chunk_bytes(64 << 10);
    return down;
  }

  fs::path dir_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<v1::Polygrad::Stub> stub_;
};

TEST_F(WebGatewayTest, UnaryAndStreamingCallsReachTheService) {
  const std::string info = call(server_->web_port(), "GetInfo", v1::GetInfoRequest());
  ASSERT_GT(info.size(), 5u);
  ASSERT_EQ(info[0], 0);
  v1::ServerInfo parsed;
  const size_t n = frame_length(info, 0);
  ASSERT_TRUE(parsed.ParseFromString(info.substr(5, n)));
  EXPECT_FALSE(parsed.version().empty());
  EXPECT_NE(info.find("grpc-status:0\r\n", 5 + n), std::string::npos);

  const std::string sid = create_session(*stub_);
  const std::string stream = call(server_->web_port(), "Download", download_of_const(sid, {256, 1024}));
  size_t frames = 0, pos = 0;
  while (pos + 5 <= stream.size() && stream[pos] == 0) {
    pos += 5 + frame_length(stream, pos);
    ++frames;
  }
  EXPECT_EQ(frames, 16u);  // 1 MiB in 64 KiB chunks
  EXPECT_NE(stream.find("grpc-status:0\r\n", pos), std::string::npos);
  EXPECT_TRUE(close_session(*stub_, sid).ok());
}

TEST_F(WebGatewayTest, AClientLeavingMidStreamCancelsItsCall) {
  const std::string sid = create_session(*stub_);
  const v1::DownloadRequest down = download_of_const(sid, {4096, 1024});
  for (int i = 0; i < 4; ++i) {
    const int fd = connect_to(server_->web_port());
    send_all(fd, request("Download", down));
    char buf[4096];
    ASSERT_GT(recv(fd, buf, sizeof buf, 0), 0);  // the stream has begun; 16 MiB are still to come
    close(fd);
  }
  EXPECT_GT(call(server_->web_port(), "GetInfo", v1::GetInfoRequest()).size(), 5u);
  EXPECT_TRUE(close_session(*stub_, sid).ok());
}

}  // namespace
}  // namespace polygrad::server
