#include "core/cache/http_store.h"

#include <curl/curl.h>

#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"

namespace polygrad {
namespace {

void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Body {
  std::string data;
  bool too_large = false;
};

size_t append_body(char* ptr, size_t size, size_t n, void* user) {
  Body& body = *static_cast<Body*>(user);
  const size_t bytes = size * n;
  if (body.data.size() + bytes > kMaxRemoteEntryBytes) {
    body.too_large = true;
    return 0;  // makes curl fail the transfer with CURLE_WRITE_ERROR
  }
  body.data.append(ptr, bytes);
  return bytes;
}

struct Upload {
  const std::string* data;
  size_t offset = 0;
};

size_t read_upload(char* buffer, size_t size, size_t n, void* user) {
  Upload& up = *static_cast<Upload*>(user);
  const size_t bytes = std::min(size * n, up.data->size() - up.offset);
  std::copy_n(up.data->data() + up.offset, bytes, buffer);
  up.offset += bytes;
  return bytes;
}

class HttpStore final : public RemoteStore {
 public:
  HttpStore(std::string base, std::string shown, std::chrono::milliseconds timeout)
      : base_(std::move(base)), shown_(std::move(shown)), timeout_(timeout) {
    init_curl_once();
  }
  ~HttpStore() override {
    for (CURL* h : idle_) curl_easy_cleanup(h);
  }

  absl::StatusOr<std::optional<std::string>> get(const std::string& key) override {
    Body body;
    absl::StatusOr<long> code = perform(key, [&](CURL* h) {
      curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
      curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, append_body);
      curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
    }, &body);
    if (!code.ok()) return code.status();
    if (*code == 404) return std::nullopt;
    if (*code != 200) return unexpected("GET", *code);
    return std::optional<std::string>(std::move(body.data));
  }

  absl::StatusOr<bool> contains(const std::string& key) override {
    absl::StatusOr<long> code = perform(key, [](CURL* h) { curl_easy_setopt(h, CURLOPT_NOBODY, 1L); });
    if (!code.ok()) return code.status();
    if (*code == 404) return false;
    if (*code != 200) return unexpected("HEAD", *code);
    return true;
  }

  absl::Status put(const std::string& key, const std::string& bytes) override {
    Upload up{&bytes};
    absl::StatusOr<long> code = perform(key, [&](CURL* h) {
      curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(h, CURLOPT_READFUNCTION, read_upload);
      curl_easy_setopt(h, CURLOPT_READDATA, &up);
      curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(bytes.size()));
    });
    if (!code.ok()) return code.status();
    if (*code == 200 || *code == 201 || *code == 204) return absl::OkStatus();
    if (*code == 413 || *code == 507) {
      return absl::ResourceExhaustedError(absl::StrCat(shown_, ": PUT answered HTTP ", *code, " (entry too large or store full)"));
    }
    return unexpected("PUT", *code);
  }

  std::string describe() const override { return shown_; }

 private:
  absl::Status unexpected(absl::string_view method, long code) const {
    return absl::FailedPreconditionError(absl::StrCat(shown_, ": ", method, " answered HTTP ", code));
  }

  // One request on a pooled handle (kept connections make the next request to the same server
  // skip the TCP and TLS handshakes). Returns the HTTP status code.
  template <typename Setup>
  absl::StatusOr<long> perform(const std::string& key, const Setup& setup, const Body* body = nullptr) {
    CURL* h = take();
    if (h == nullptr) return absl::ResourceExhaustedError("cannot create a curl handle");
    const std::string url = absl::StrCat(base_, "/ac/", remote_entry_name(key));
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM for DNS timeouts
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_.count()));
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(timeout_.count()));
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    setup(h);
    const CURLcode rc = curl_easy_perform(h);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    give_back(h);
    if (body != nullptr && body->too_large)
      return absl::DataLossError(absl::StrCat(shown_, ": entry larger than ", kMaxRemoteEntryBytes, " bytes"));
    switch (rc) {
      case CURLE_OK: return code;
      case CURLE_OPERATION_TIMEDOUT:
        return absl::DeadlineExceededError(absl::StrCat(shown_, ": no answer within ", timeout_.count(), " ms"));
      case CURLE_COULDNT_CONNECT:
      case CURLE_COULDNT_RESOLVE_HOST:
      case CURLE_SSL_CONNECT_ERROR:
      case CURLE_SEND_ERROR:
      case CURLE_RECV_ERROR:
      case CURLE_GOT_NOTHING:
        return absl::UnavailableError(absl::StrCat(shown_, ": ", curl_easy_strerror(rc)));
      default: return absl::DataLossError(absl::StrCat(shown_, ": ", curl_easy_strerror(rc)));
    }
  }

  CURL* take() {
    {
      std::lock_guard lock(mu_);
      if (!idle_.empty()) {
        CURL* h = idle_.back();
        idle_.pop_back();
        curl_easy_reset(h);  // keeps the connection cache, forgets the last request's options
        return h;
      }
    }
    return curl_easy_init();
  }
  void give_back(CURL* h) {
    std::lock_guard lock(mu_);
    idle_.push_back(h);
  }

  const std::string base_, shown_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::vector<CURL*> idle_;
};

}  // namespace

std::unique_ptr<RemoteStore> make_http_store(std::string base, std::string shown, std::chrono::milliseconds timeout) {
  return std::make_unique<HttpStore>(std::move(base), std::move(shown), timeout);
}

}  // namespace polygrad
