// One GPU for execution: its primary context, caching allocator, pinned staging for host
// transfers, streams, events and loaded kernels. Every call makes the context current on the
// calling thread first (the driver keeps the current context per thread, and gRPC and the worker
// pool call from many threads).
//
// This file has been compiled and its GPU-free parts tested on machines without a GPU; the
// driver calls follow the CUDA driver API documentation but have not run on a GPU yet.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "core/ir/uop.h"
#include "core/runtime/buffer.h"
#include "core/runtime/cuda/allocator.h"
#include "core/runtime/cuda/driver.h"
#include "core/runtime/program.h"

namespace polygrad {

namespace cuda {
using Stream = struct CUstream_st*;
}

// The grid for a kernel whose outer loop has `n` iterations (render/cuda_renderer.h: one
// iteration per thread, grid-stride beyond the grid). At least one block; at most 32 blocks per
// multiprocessor, enough to fill the GPU, so large loops stride instead of launching millions
// of blocks.
struct LaunchDims {
  unsigned grid;
  unsigned block;
};
LaunchDims launch_dims(int64_t n, int multiprocessors);

class CudaDevice;

// A stream of the device: work on it runs in order. Destroyed with the object.
class CudaStream {
 public:
  static absl::StatusOr<std::unique_ptr<CudaStream>> create(CudaDevice& device);
  ~CudaStream();
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  cuda::Stream handle() const { return stream_; }
  CudaDevice& device() const { return device_; }
  // Waits for everything queued so far; the first error of queued work shows here.
  absl::Status synchronize() const;

 private:
  CudaStream(CudaDevice& device, cuda::Stream s) : device_(device), stream_(s) {}
  CudaDevice& device_;
  cuda::Stream stream_;
};

// A kernel loaded from a CUBIN: render/cuda_renderer.h's pg_kernel(b0, ..., bk, n).
class CudaProgram final : public Program {
 public:
  ~CudaProgram() override;
  // Queues the kernel on `stream` over device pointers `args` (DEFINE_GLOBAL order) for `n`
  // outer iterations, with `threads_per_iteration` threads each (render/cuda_renderer.h: 32 for a
  // warp-reduction kernel). Returns when queued; errors of the run show at the next synchronize.
  absl::Status run(const CudaStream& stream, const void* const* args, size_t nargs, int64_t n,
                   int threads_per_iteration = 1) const;
  // Program's host-side entry: runs [0, end) on a stream of its own and waits. `start` must be 0
  // (a GPU kernel is never split across host threads). The driver's error, if any, is returned.
  absl::Status launch(void** bufs, int64_t start, int64_t end) const override;

 private:
  friend class CudaDevice;
  CudaProgram(CudaDevice& device, void* module, void* function, size_t nparams)
      : device_(device), module_(module), function_(function), nparams_(nparams) {}
  CudaDevice& device_;
  void* module_;
  void* function_;
  size_t nparams_;  // buffers the kernel takes; 0: unknown (any count accepted)
};

class CudaDevice {
 public:
  // The process's object for device `ordinal`, created at first use (retains the primary
  // context; never released, like the driver). FAILED_PRECONDITION when CUDA is unavailable or
  // there is no such device.
  static absl::StatusOr<CudaDevice*> get(int ordinal);

  const CudaDeviceProps& props() const { return props_; }
  const std::string& name() const { return name_; }  // "CUDA:0", as Buffer::device() says
  const CudaDriver& driver() const { return *driver_; }
  CachingAllocator& allocator() { return *allocator_; }

  absl::Status make_current() const;

  // A device buffer, zero-filled unless `fill` is None; RESOURCE_EXHAUSTED (this request only) when the device is out
  // of memory after the allocator released its cache.
  absl::StatusOr<BufferPtr> allocate(DType dtype, Shape shape, const CudaStream& stream,
                                     Buffer::Fill fill = Buffer::Fill::Zero);

  // Host <-> device copies through pinned staging memory, chunk by chunk; return when done.
  absl::Status upload(const void* host, uint64_t device_address, size_t bytes, const CudaStream& stream);
  absl::Status download(uint64_t device_address, void* host, size_t bytes, const CudaStream& stream);
  absl::Status copy(uint64_t from, uint64_t to, size_t bytes, const CudaStream& stream);

  // CUBIN bytes (runtime/cuda/cubin.h checks them) as a launchable kernel.
  absl::StatusOr<ProgramPtr> load(const std::string& cubin, size_t nparams);

  // Kernel time: the time between two events recorded on `stream` around queued work. Neither
  // end waits, so timing does not serialize the launches between them.
  class Timer {
   public:
    // Records the start now (in stream order).
    static absl::StatusOr<std::unique_ptr<Timer>> start(const CudaStream& stream);
    ~Timer();
    // Records the end now (in stream order); returns without waiting.
    absl::Status record_end();
    // Seconds the GPU spent between the two events; waits for the end event. Call after
    // record_end, typically once the stream has been synchronized anyway.
    absl::StatusOr<double> seconds() const;

   private:
    Timer(const CudaStream& stream) : stream_(stream) {}
    const CudaStream& stream_;
    void* start_ = nullptr;
    void* end_ = nullptr;
  };

 private:
  CudaDevice() = default;
  const CudaDriver* driver_ = nullptr;
  CudaDeviceProps props_;
  std::string name_;
  void* context_ = nullptr;
  std::unique_ptr<CachingAllocator> allocator_;
  std::mutex staging_mu_;  // one transfer at a time through the pinned buffer
  void* staging_ = nullptr;
  size_t staging_bytes_ = 0;
};

}  // namespace polygrad
