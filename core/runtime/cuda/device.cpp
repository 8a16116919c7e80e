#include "core/runtime/cuda/device.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/render/c_renderer.h"
#include "core/runtime/cuda/driver_api.h"

namespace polygrad {
namespace {

using namespace cuda;  // NOLINT: the driver's own names, as in cuda.h

constexpr unsigned kBlock = 256;
constexpr int kBlocksPerMultiprocessor = 32;
// Pinned host memory every transfer goes through: large enough for full copy bandwidth, small
// enough to keep per device for the process's life.
constexpr size_t kStagingBytes = size_t{16} << 20;

CUdeviceptr dptr(const void* p) { return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p)); }

}  // namespace

LaunchDims launch_dims(int64_t n, int multiprocessors) {
  const int64_t blocks = (std::max<int64_t>(n, 1) + kBlock - 1) / kBlock;
  const int64_t cap = int64_t{std::max(multiprocessors, 1)} * kBlocksPerMultiprocessor;
  return LaunchDims{static_cast<unsigned>(std::min(blocks, cap)), kBlock};
}

// --- CudaDevice -------------------------------------------------------------------------------

absl::StatusOr<CudaDevice*> CudaDevice::get(int ordinal) {
  static std::mutex mu;
  static std::map<int, absl::StatusOr<CudaDevice*>>* devices = new std::map<int, absl::StatusOr<CudaDevice*>>();
  std::lock_guard lock(mu);
  if (auto it = devices->find(ordinal); it != devices->end()) return it->second;
  auto open = [&]() -> absl::StatusOr<CudaDevice*> {
    auto driver = CudaDriver::get();
    if (!driver.ok()) return driver.status();
    auto all = (*driver)->devices();
    if (!all.ok()) return all.status();
    if (ordinal < 0 || ordinal >= static_cast<int>(all->size()))
      return absl::FailedPreconditionError(absl::StrCat("no CUDA device ", ordinal, " (the driver sees ", all->size(), ")"));
    const DriverApi& f = (*driver)->api();
    auto d = std::unique_ptr<CudaDevice>(new CudaDevice());
    d->driver_ = *driver;
    d->props_ = (*all)[ordinal];
    d->name_ = absl::StrCat("CUDA:", ordinal);
    CUdevice dev = 0;
    if (absl::Status s = d->driver_->check("cuDeviceGet", f.cuDeviceGet(&dev, ordinal)); !s.ok()) return s;
    CUcontext ctx = nullptr;
    // The primary context is the one every library in the process shares for this device
    // (PyTorch in the same process included); it is retained for the process's life.
    if (absl::Status s = d->driver_->check("cuDevicePrimaryCtxRetain", f.cuDevicePrimaryCtxRetain(&ctx, dev)); !s.ok())
      return s;
    d->context_ = ctx;
    if (absl::Status s = d->make_current(); !s.ok()) return s;
    void* staging = nullptr;
    if (absl::Status s = d->driver_->check("cuMemHostAlloc", f.cuMemHostAlloc(&staging, kStagingBytes, CU_MEMHOSTALLOC_PORTABLE));
        !s.ok())
      return s;
    d->staging_ = staging;
    d->staging_bytes_ = kStagingBytes;
    CudaDevice* raw = d.get();
    d->allocator_ = std::make_unique<CachingAllocator>(
        d->name_, CachingAllocator::Backend{
                      [raw](size_t bytes) -> absl::StatusOr<uint64_t> {
                        if (absl::Status s = raw->make_current(); !s.ok()) return s;
                        CUdeviceptr p = 0;
                        if (absl::Status s = raw->driver_->check("cuMemAlloc", raw->driver_->api().cuMemAlloc(&p, bytes));
                            !s.ok())
                          return s;
                        return static_cast<uint64_t>(p);
                      },
                      [raw](uint64_t address) {
                        if (!raw->make_current().ok()) return;
                        raw->driver_->api().cuMemFree(static_cast<CUdeviceptr>(address));
                      }});
    return d.release();  // lives as long as the process: buffers may outlive any other owner
  };
  return devices->emplace(ordinal, open()).first->second;
}

absl::Status CudaDevice::make_current() const {
  return driver_->check("cuCtxSetCurrent", driver_->api().cuCtxSetCurrent(static_cast<CUcontext>(context_)));
}

absl::StatusOr<BufferPtr> CudaDevice::allocate(DType dtype, Shape shape, const CudaStream& stream, Buffer::Fill fill) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  const size_t bytes = static_cast<size_t>(numel) * dtype_itemsize(dtype);
  auto address = allocator_->allocate(bytes);
  if (!address.ok()) return address.status();
  CachingAllocator* alloc = allocator_.get();
  BufferPtr b = Buffer::adopt_device(dtype, std::move(shape), reinterpret_cast<void*>(static_cast<uintptr_t>(*address)),
                                     name_, [alloc, bytes](void* p) { alloc->release(dptr(p), bytes); });
  // Zero-filled like host buffers (unless the caller overwrites it all). A block handed back to the
  // allocator may still be read by queued work on this stream; the stream orders the memset after it.
  if (bytes > 0 && fill == Buffer::Fill::Zero) {
    if (absl::Status s = make_current(); !s.ok()) return s;
    if (absl::Status s = driver_->check("cuMemsetD8Async", driver_->api().cuMemsetD8Async(*address, 0, bytes, stream.handle()));
        !s.ok())
      return s;
  }
  return b;
}

absl::Status CudaDevice::upload(const void* host, uint64_t device_address, size_t bytes, const CudaStream& stream) {
  if (absl::Status s = make_current(); !s.ok()) return s;
  const DriverApi& f = driver_->api();
  std::lock_guard lock(staging_mu_);
  for (size_t off = 0; off < bytes; off += staging_bytes_) {
    const size_t n = std::min(staging_bytes_, bytes - off);
    std::memcpy(staging_, static_cast<const char*>(host) + off, n);
    if (absl::Status s = driver_->check("cuMemcpyHtoDAsync", f.cuMemcpyHtoDAsync(device_address + off, staging_, n, stream.handle()));
        !s.ok())
      return s;
    // The staging buffer is refilled next round: wait until the driver has read it.
    if (absl::Status s = stream.synchronize(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status CudaDevice::download(uint64_t device_address, void* host, size_t bytes, const CudaStream& stream) {
  if (absl::Status s = make_current(); !s.ok()) return s;
  const DriverApi& f = driver_->api();
  std::lock_guard lock(staging_mu_);
  for (size_t off = 0; off < bytes; off += staging_bytes_) {
    const size_t n = std::min(staging_bytes_, bytes - off);
    if (absl::Status s = driver_->check("cuMemcpyDtoHAsync", f.cuMemcpyDtoHAsync(staging_, device_address + off, n, stream.handle()));
        !s.ok())
      return s;
    if (absl::Status s = stream.synchronize(); !s.ok()) return s;
    std::memcpy(static_cast<char*>(host) + off, staging_, n);
  }
  if (bytes == 0) return stream.synchronize();  // still orders the caller after queued kernels
  return absl::OkStatus();
}

absl::Status CudaDevice::copy(uint64_t from, uint64_t to, size_t bytes, const CudaStream& stream) {
  if (bytes == 0) return absl::OkStatus();
  if (absl::Status s = make_current(); !s.ok()) return s;
  return driver_->check("cuMemcpyDtoDAsync", driver_->api().cuMemcpyDtoDAsync(to, from, bytes, stream.handle()));
}

absl::StatusOr<ProgramPtr> CudaDevice::load(const std::string& cubin, size_t nparams) {
  if (absl::Status s = make_current(); !s.ok()) return s;
  const DriverApi& f = driver_->api();
  CUmodule module = nullptr;
  if (absl::Status s = driver_->check("cuModuleLoadData", f.cuModuleLoadData(&module, cubin.data())); !s.ok()) return s;
  CUfunction function = nullptr;
  if (absl::Status s = driver_->check("cuModuleGetFunction", f.cuModuleGetFunction(&function, module, kKernelEntry));
      !s.ok()) {
    f.cuModuleUnload(module);
    return s;
  }
  return ProgramPtr(new CudaProgram(*this, module, function, nparams));
}

// --- CudaStream ---------------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<CudaStream>> CudaStream::create(CudaDevice& device) {
  if (absl::Status s = device.make_current(); !s.ok()) return s;
  CUstream s = nullptr;
  // Non-blocking: never serialized with the legacy default stream another library may use.
  if (absl::Status st = device.driver().check("cuStreamCreate", device.driver().api().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
      !st.ok())
    return st;
  return std::unique_ptr<CudaStream>(new CudaStream(device, s));
}

CudaStream::~CudaStream() {
  if (!device_.make_current().ok()) return;
  const DriverApi& f = device_.driver().api();
  f.cuStreamSynchronize(stream_);
  f.cuStreamDestroy(stream_);
}

absl::Status CudaStream::synchronize() const {
  if (absl::Status s = device_.make_current(); !s.ok()) return s;
  return device_.driver().check("cuStreamSynchronize", device_.driver().api().cuStreamSynchronize(stream_));
}

// --- CudaProgram --------------------------------------------------------------------------------

CudaProgram::~CudaProgram() {
  if (device_.make_current().ok()) device_.driver().api().cuModuleUnload(static_cast<CUmodule>(module_));
}

absl::Status CudaProgram::run(const CudaStream& stream, const void* const* args, size_t nargs, int64_t n,
                              int threads_per_iteration) const {
  if (nparams_ != 0 && nargs != nparams_)
    return absl::InternalError(absl::StrCat("kernel takes ", nparams_, " buffers, launched with ", nargs));
  if (absl::Status s = device_.make_current(); !s.ok()) return s;
  // cuLaunchKernel takes a pointer to each argument's value: the device pointers, then n.
  std::vector<CUdeviceptr> ptrs(nargs);
  std::vector<void*> params(nargs + 1);
  for (size_t i = 0; i < nargs; ++i) {
    ptrs[i] = dptr(args[i]);
    params[i] = &ptrs[i];
  }
  int64_t count = n;
  params[nargs] = &count;
  const LaunchDims d = launch_dims(n * threads_per_iteration, device_.props().multiprocessors);
  return device_.driver().check(
      "cuLaunchKernel", device_.driver().api().cuLaunchKernel(static_cast<CUfunction>(function_), d.grid, 1, 1, d.block, 1,
                                                              1, 0, stream.handle(), params.data(), nullptr));
}

absl::Status CudaProgram::launch(void** bufs, int64_t start, int64_t end) const {
  if (start != 0) return absl::InternalError("a CUDA kernel cannot start mid-loop");
  auto stream = CudaStream::create(device_);
  if (!stream.ok()) return stream.status();
  if (absl::Status s = run(**stream, bufs, nparams_, end); !s.ok()) return s;
  return (*stream)->synchronize();
}

// --- Timer --------------------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<CudaDevice::Timer>> CudaDevice::Timer::start(const CudaStream& stream) {
  CudaDevice& d = stream.device();
  if (absl::Status s = d.make_current(); !s.ok()) return s;
  const DriverApi& f = d.driver().api();
  auto t = std::unique_ptr<Timer>(new Timer(stream));
  CUevent a = nullptr, b = nullptr;
  if (absl::Status s = d.driver().check("cuEventCreate", f.cuEventCreate(&a, CU_EVENT_DEFAULT)); !s.ok()) return s;
  t->start_ = a;
  if (absl::Status s = d.driver().check("cuEventCreate", f.cuEventCreate(&b, CU_EVENT_DEFAULT)); !s.ok()) return s;
  t->end_ = b;
  if (absl::Status s = d.driver().check("cuEventRecord", f.cuEventRecord(a, stream.handle())); !s.ok()) return s;
  return t;
}

CudaDevice::Timer::~Timer() {
  CudaDevice& d = stream_.device();
  if (!d.make_current().ok()) return;
  if (start_ != nullptr) d.driver().api().cuEventDestroy(static_cast<CUevent>(start_));
  if (end_ != nullptr) d.driver().api().cuEventDestroy(static_cast<CUevent>(end_));
}

absl::Status CudaDevice::Timer::record_end() {
  CudaDevice& d = stream_.device();
  if (absl::Status s = d.make_current(); !s.ok()) return s;
  return d.driver().check("cuEventRecord", d.driver().api().cuEventRecord(static_cast<CUevent>(end_), stream_.handle()));
}

absl::StatusOr<double> CudaDevice::Timer::seconds() const {
  CudaDevice& d = stream_.device();
  const DriverApi& f = d.driver().api();
  if (absl::Status s = d.make_current(); !s.ok()) return s;
  if (absl::Status s = d.driver().check("cuEventSynchronize", f.cuEventSynchronize(static_cast<CUevent>(end_))); !s.ok())
    return s;
  float ms = 0;
  if (absl::Status s = d.driver().check(
          "cuEventElapsedTime", f.cuEventElapsedTime(&ms, static_cast<CUevent>(start_), static_cast<CUevent>(end_)));
      !s.ok())
    return s;
  return ms / 1000.0;
}

}  // namespace polygrad
