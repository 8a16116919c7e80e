#include "core/cache/redis_store.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace polygrad {
namespace {

using Clock = std::chrono::steady_clock;

// A RESP2 reply we use: a simple string, an error, an integer, a bulk string or nil.
struct Reply {
  char type = 0;  // '+', '-', ':', '$'
  bool nil = false;
  int64_t integer = 0;
  std::string text;
};

class Connection {
 public:
  explicit Connection(int fd) : fd_(fd) {}
  ~Connection() { ::close(fd_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  absl::Status send(const std::vector<absl::string_view>& args, Clock::time_point deadline) {
    std::string out = absl::StrCat("*", args.size(), "\r\n");
    for (absl::string_view a : args) absl::StrAppend(&out, "$", a.size(), "\r\n", a, "\r\n");
    for (size_t off = 0; off < out.size();) {
      if (absl::Status s = wait(POLLOUT, deadline); !s.ok()) return s;
      const ssize_t n = ::send(fd_, out.data() + off, out.size() - off, MSG_NOSIGNAL);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) return absl::UnavailableError(absl::StrCat("send: ", std::strerror(errno)));
      off += static_cast<size_t>(n);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Reply> receive(Clock::time_point deadline) {
    absl::StatusOr<std::string> line = read_line(deadline);
    if (!line.ok()) return line.status();
    if (line->empty()) return absl::DataLossError("empty reply line");
    Reply r;
    r.type = (*line)[0];
    absl::string_view rest = absl::string_view(*line).substr(1);
    switch (r.type) {
      case '+':
      case '-': r.text = std::string(rest.substr(0, 200)); return r;
      case ':':
        if (!absl::SimpleAtoi(rest, &r.integer)) return absl::DataLossError("bad integer reply");
        return r;
      case '$': {
        int64_t len = 0;
        if (!absl::SimpleAtoi(rest, &len) || len < -1) return absl::DataLossError("bad bulk length");
        if (len == -1) {
          r.nil = true;
          return r;
        }
        if (static_cast<uint64_t>(len) > kMaxRemoteEntryBytes)
          return absl::DataLossError(absl::StrCat("entry of ", len, " bytes is over the ", kMaxRemoteEntryBytes, "-byte cap"));
        absl::StatusOr<std::string> data = read_exact(static_cast<size_t>(len) + 2, deadline);
        if (!data.ok()) return data.status();
        if (data->compare(data->size() - 2, 2, "\r\n") != 0) return absl::DataLossError("bulk string not ended by CRLF");
        data->resize(data->size() - 2);
        r.text = *std::move(data);
        return r;
      }
      default: return absl::DataLossError("reply of a type this client does not use");
    }
  }

  absl::Status wait(short events, Clock::time_point deadline) {
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return absl::DeadlineExceededError("no answer in time");
      pollfd p{fd_, events, 0};
      const int n = ::poll(&p, 1, static_cast<int>(left));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return absl::UnavailableError(absl::StrCat("poll: ", std::strerror(errno)));
      if (n == 0) return absl::DeadlineExceededError("no answer in time");
      return absl::OkStatus();
    }
  }

 private:
  absl::Status fill(Clock::time_point deadline) {
    char chunk[64 * 1024];
    while (true) {
      if (absl::Status s = wait(POLLIN, deadline); !s.ok()) return s;
      const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n == 0) return absl::UnavailableError("the server closed the connection");
      if (n < 0) return absl::UnavailableError(absl::StrCat("recv: ", std::strerror(errno)));
      buffer_.append(chunk, static_cast<size_t>(n));
      return absl::OkStatus();
    }
  }
  absl::StatusOr<std::string> read_line(Clock::time_point deadline) {
    while (true) {
      if (const size_t end = buffer_.find("\r\n"); end != std::string::npos) {
        std::string line = buffer_.substr(0, end);
        buffer_.erase(0, end + 2);
        return line;
      }
      if (buffer_.size() > 4096) return absl::DataLossError("reply line longer than 4096 bytes");
      if (absl::Status s = fill(deadline); !s.ok()) return s;
    }
  }
  absl::StatusOr<std::string> read_exact(size_t n, Clock::time_point deadline) {
    while (buffer_.size() < n) {
      if (absl::Status s = fill(deadline); !s.ok()) return s;
    }
    std::string out = buffer_.substr(0, n);
    buffer_.erase(0, n);
    return out;
  }

  int fd_;
  std::string buffer_;
};

class RedisStore final : public RemoteStore {
 public:
  RedisStore(std::string host, int port, int db, std::string user, std::string password,
             std::chrono::milliseconds timeout)
      : host_(std::move(host)), port_(port), db_(db), user_(std::move(user)), password_(std::move(password)),
        timeout_(timeout) {}

  absl::StatusOr<std::optional<std::string>> get(const std::string& key) override {
    const std::string name = redis_key(key);
    absl::StatusOr<Reply> r = command({"GET", name});
    if (!r.ok()) return r.status();
    if (r->type != '$') return unexpected("GET", *r);
    if (r->nil) return std::nullopt;
    return std::optional<std::string>(std::move(r->text));
  }

  absl::StatusOr<bool> contains(const std::string& key) override {
    const std::string name = redis_key(key);
    absl::StatusOr<Reply> r = command({"EXISTS", name});
    if (!r.ok()) return r.status();
    if (r->type != ':') return unexpected("EXISTS", *r);
    return r->integer > 0;
  }

  absl::Status put(const std::string& key, const std::string& bytes) override {
    const std::string name = redis_key(key);
    absl::StatusOr<Reply> r = command({"SET", name, bytes, "NX"});
    if (!r.ok()) return r.status();
    if (r->type == '+' || (r->type == '$' && r->nil)) return absl::OkStatus();  // stored, or already there
    if (r->type == '-' && r->text.rfind("OOM", 0) == 0)
      return absl::ResourceExhaustedError(absl::StrCat(describe(), ": SET: ", r->text));
    return unexpected("SET", *r);
  }

  std::string describe() const override { return absl::StrCat("redis://", host_, ":", port_, "/", db_); }

 private:
  static std::string redis_key(const std::string& key) { return absl::StrCat("polygrad:ac:", remote_entry_name(key)); }

  absl::Status unexpected(absl::string_view command, const Reply& r) const {
    return absl::FailedPreconditionError(absl::StrCat(describe(), ": ", command, " answered ",
                                                      r.type == '-' ? r.text : std::string(1, r.type)));
  }

  // One command on a pooled connection; a connection that failed in any way is dropped. A pooled
  // connection the server has closed since (a restart, an idle timeout) is retried once on a
  // fresh one, so it is not counted as the remote failing.
  absl::StatusOr<Reply> command(const std::vector<absl::string_view>& args) {
    const Clock::time_point deadline = Clock::now() + timeout_;
    for (bool pooled_ok : {true, false}) {
      bool pooled = false;
      absl::StatusOr<std::unique_ptr<Connection>> conn = take(deadline, pooled_ok, pooled);
      if (!conn.ok()) return with_address(conn.status());
      absl::StatusOr<Reply> r = round_trip(**conn, args, deadline);
      if (r.ok()) {
        give_back(*std::move(conn));
        return r;
      }
      if (!pooled || r.status().code() != absl::StatusCode::kUnavailable) return with_address(r.status());
    }
    return with_address(absl::UnavailableError("the connection closed twice"));
  }

  static absl::StatusOr<Reply> round_trip(Connection& c, const std::vector<absl::string_view>& args,
                                          Clock::time_point deadline) {
    if (absl::Status s = c.send(args, deadline); !s.ok()) return s;
    return c.receive(deadline);
  }

  absl::Status with_address(const absl::Status& s) const {
    return absl::Status(s.code(), absl::StrCat(describe(), ": ", s.message()));
  }

  absl::StatusOr<std::unique_ptr<Connection>> take(Clock::time_point deadline, bool pooled_ok, bool& pooled) {
    if (pooled_ok) {
      std::lock_guard lock(mu_);
      if (!idle_.empty()) {
        std::unique_ptr<Connection> c = std::move(idle_.back());
        idle_.pop_back();
        pooled = true;
        return c;
      }
    }
    absl::StatusOr<std::unique_ptr<Connection>> c = connect(deadline);
    if (!c.ok()) return c.status();
    if (!password_.empty()) {
      std::vector<absl::string_view> auth = {"AUTH"};
      if (!user_.empty()) auth.push_back(user_);
      auth.push_back(password_);
      if (absl::Status s = expect_ok(**c, auth, deadline); !s.ok()) return s;
    }
    if (db_ != 0) {
      const std::string db = absl::StrCat(db_);
      if (absl::Status s = expect_ok(**c, {"SELECT", db}, deadline); !s.ok()) return s;
    }
    return c;
  }

  static absl::Status expect_ok(Connection& c, const std::vector<absl::string_view>& args, Clock::time_point deadline) {
    absl::StatusOr<Reply> r = round_trip(c, args, deadline);
    if (!r.ok()) return r.status();
    if (r->type != '+') {
      return absl::FailedPreconditionError(absl::StrCat(args[0], " answered ", r->type == '-' ? r->text : "no +OK"));
    }
    return absl::OkStatus();
  }

  void give_back(std::unique_ptr<Connection> c) {
    std::lock_guard lock(mu_);
    if (idle_.size() < 8) idle_.push_back(std::move(c));
  }

  absl::StatusOr<std::unique_ptr<Connection>> connect(Clock::time_point deadline) const {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const std::string port = absl::StrCat(port_);
    // Name resolution is not bounded by the timeout; give an address or a name the host
    // resolves locally (/etc/hosts, a cluster DNS) to keep it short.
    if (const int rc = getaddrinfo(host_.c_str(), port.c_str(), &hints, &found); rc != 0)
      return absl::UnavailableError(absl::StrCat("cannot resolve ", host_, ": ", gai_strerror(rc)));
    absl::Status last = absl::UnavailableError("no address");
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      auto conn = std::make_unique<Connection>(fd);
      if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
        last = absl::UnavailableError(absl::StrCat("connect: ", std::strerror(errno)));
        continue;
      }
      if (absl::Status s = conn->wait(POLLOUT, deadline); !s.ok()) {
        last = s;
        continue;
      }
      int error = 0;
      socklen_t len = sizeof error;
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len);
      if (error != 0) {
        last = absl::UnavailableError(absl::StrCat("connect: ", std::strerror(error)));
        continue;
      }
      freeaddrinfo(found);
      return conn;
    }
    freeaddrinfo(found);
    return last;
  }

  const std::string host_;
  const int port_, db_;
  const std::string user_, password_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_;
};

}  // namespace

std::unique_ptr<RemoteStore> make_redis_store(std::string host, int port, int db, std::string user,
                                              std::string password, std::chrono::milliseconds timeout) {
  return std::make_unique<RedisStore>(std::move(host), port, db, std::move(user), std::move(password), timeout);
}

}  // namespace polygrad
