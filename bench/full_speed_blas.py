"""Full-speed BLAS for a benchmark's numpy/PyTorch references (see TOOLCHAIN.md): some machines set
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE, which make OpenBLAS run a generic kernel several times
slower. `unset()` must run before numpy or torch is imported; `describe()` names the kernel the
references then run, read from the OpenBLAS library the process loaded."""
import ctypes
import os


def unset() -> None:
  for name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
    os.environ.pop(name, None)


def describe() -> str:
  """'OpenBLAS <config>, core <name>, <n> threads' of the library in this process, or what was
  found instead."""
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
