#include "server/shm.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace polygrad::server {

absl::StatusOr<std::unique_ptr<SharedRegion>> SharedRegion::create(uint64_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("shared memory region of 0 bytes");
  // The name is only a label for /proc listings; the file has no path of its own.
  int fd = memfd_create("polygrad-shm", MFD_CLOEXEC);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("memfd_create: ", std::strerror(errno)));
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    close(fd);
    return absl::ResourceExhaustedError(absl::StrCat("cannot size a shared region of ", bytes, " bytes: ", std::strerror(err)));
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    close(fd);
    return absl::ResourceExhaustedError(absl::StrCat("cannot map a shared region of ", bytes, " bytes: ", std::strerror(err)));
  }
  return std::unique_ptr<SharedRegion>(new SharedRegion(fd, static_cast<char*>(p), bytes));
}

SharedRegion::~SharedRegion() {
  munmap(data_, bytes_);
  close(fd_);
}

std::string SharedRegion::path() const { return absl::StrCat("/proc/", getpid(), "/fd/", fd_); }

absl::StatusOr<std::pair<uint64_t, RegionPtr>> SharedMemoryRegions::create(const std::string& session_id,
                                                                           uint64_t bytes) {
  {
    std::lock_guard lock(mu_);
    if (bytes > max_bytes_ || bytes_ + bytes > max_bytes_) {
      return absl::ResourceExhaustedError(absl::StrCat("shared memory of ", bytes, " bytes would exceed shm_max_bytes (",
                                                       max_bytes_, "; ", bytes_, " in use)"));
    }
    bytes_ += bytes;  // reserved now, so concurrent creates cannot both pass the check
  }
  absl::StatusOr<std::unique_ptr<SharedRegion>> r = SharedRegion::create(bytes);
  std::lock_guard lock(mu_);
  if (!r.ok()) {
    bytes_ -= bytes;
    return r.status();
  }
  const uint64_t id = next_id_++;
  RegionPtr region = *std::move(r);
  regions_.emplace(Key{session_id, id}, region);
  return std::make_pair(id, std::move(region));
}

absl::StatusOr<RegionPtr> SharedMemoryRegions::find(const std::string& session_id, uint64_t region) const {
  std::lock_guard lock(mu_);
  auto it = regions_.find(Key{session_id, region});
  if (it == regions_.end()) return absl::NotFoundError(absl::StrCat("no shared memory region ", region, " in this session"));
  return it->second;
}

absl::Status SharedMemoryRegions::free(const std::string& session_id, uint64_t region) {
  RegionPtr gone;  // unmapped outside the lock (a call still copying holds its own reference)
  std::lock_guard lock(mu_);
  auto it = regions_.find(Key{session_id, region});
  if (it == regions_.end()) return absl::NotFoundError(absl::StrCat("no shared memory region ", region, " in this session"));
  bytes_ -= it->second->bytes();
  gone = std::move(it->second);
  regions_.erase(it);
  return absl::OkStatus();
}

void SharedMemoryRegions::drop_session(const std::string& session_id) {
  std::vector<RegionPtr> gone;
  std::lock_guard lock(mu_);
  for (auto it = regions_.begin(); it != regions_.end();) {
    if (it->first.session == session_id) {
      bytes_ -= it->second->bytes();
      gone.push_back(std::move(it->second));
      regions_.erase(it++);
    } else {
      ++it;
    }
  }
}

uint64_t SharedMemoryRegions::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

size_t SharedMemoryRegions::count() const {
  std::lock_guard lock(mu_);
  return regions_.size();
}

}  // namespace polygrad::server
