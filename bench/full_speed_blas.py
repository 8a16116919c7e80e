"""Full-speed BLAS for a benchmark's numpy/PyTorch references (see TOOLCHAIN.md): some machines set
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE, which make OpenBLAS run a generic kernel several times
slower. `unset()` must run before numpy or torch is imported; `describe()` names the kernel and
threads the references then run (threadpoolctl, Debian's python3-threadpoolctl, reads them from the
libraries this process loaded); `machine()` names the CPU and its vector ISA, since a speed claim
holds for one kind of CPU."""
import ctypes
import os


def unset() -> None:
  for name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
    os.environ.pop(name, None)


def _cpuinfo(key: str) -> str:
  with open("/proc/cpuinfo") as f:
    return next((line.split(":", 1)[1].strip() for line in f if line.startswith(key)), "")


def vector_isa() -> str:
  """The widest x86 vector extension the CPU reports: AVX-512, AVX2 or neither."""
  flags = set(_cpuinfo("flags").split())
  if "avx512f" in flags:
    return f"AVX-512 ({sum(f.startswith('avx512') for f in flags)} avx512 flags)"
  if "avx2" in flags:
    return "AVX2 (no AVX-512)"
  return "no AVX2" if flags else "unknown (not x86 /proc/cpuinfo)"


def machine() -> str:
  return f"{_cpuinfo('model name') or '?'}, {os.cpu_count() or 1} CPUs, {vector_isa()}"


def describe() -> str:
  """Each BLAS/OpenMP library loaded here with its kernel and thread count, or what was found."""
  try:
    from threadpoolctl import threadpool_info
  except ImportError:
    return _describe_openblas() + " (threadpoolctl missing: apt-get install python3-threadpoolctl)"
  pools = threadpool_info()
  if not pools:
    return "no BLAS or OpenMP library loaded"
  return "; ".join(f"{p.get('internal_api')} {p.get('version') or ''} "
                   f"{('kernel ' + p['architecture'] + ', ') if p.get('architecture') else ''}"
                   f"{p.get('num_threads')} threads ({os.path.basename(p.get('filepath', '?'))})"
                   for p in pools)


def _describe_openblas() -> str:
  with open("/proc/self/maps") as f:
    libs = sorted({line.split()[-1] for line in f if "openblas" in line.lower() and line.split()[-1].startswith("/")})
  if not libs:
    return "no OpenBLAS loaded (numpy's BLAS: see numpy.show_config())"
  lib = ctypes.CDLL(libs[0])
  out = [libs[0]]
  for fn, fmt in (("openblas_get_config", "{}"), ("openblas_get_corename", "core {}")):
    f = getattr(lib, fn, None)
    if f is not None:
      f.restype = ctypes.c_char_p
      out.append(fmt.format(f().decode()))
  threads = getattr(lib, "openblas_get_num_threads", None)
  if threads is not None:
    out.append(f"{threads()} threads")
  return ", ".join(out)


def torch_capability(torch) -> str:
  """The vector code PyTorch's CPU kernels chose ("CPU capability usage: AVX2" in its config)."""
  for line in torch.__config__.show().splitlines():
    if "CPU capability usage" in line:
      return line.split(":", 1)[1].strip()
  return "?"
