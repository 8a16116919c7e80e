"""The embedded daemon: a private polygradd on a Unix socket in a temporary directory, started when
POLYGRAD_ADDRESS is unset. The binary is POLYGRAD_DAEMON, else ``build/polygradd`` of the source
tree this package lives in, else ``polygradd`` on PATH."""
from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Optional, Sequence

from .errors import PolygradConnectionError


def default_cache_dir() -> str:
  """The daemon's default kernel-cache directory: $XDG_CACHE_HOME/polygrad or ~/.cache/polygrad."""
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return os.path.join(base, "polygrad")


def find_daemon_binary() -> str:
  """POLYGRAD_DAEMON, else <repo>/build/polygradd next to this package's source tree, else PATH."""
  env = os.environ.get("POLYGRAD_DAEMON")
  if env:
    return env
  repo_build = Path(__file__).resolve().parent.parent.parent.parent / "build" / "polygradd"
  if repo_build.is_file() and os.access(repo_build, os.X_OK):
    return str(repo_build)
  found = shutil.which("polygradd")
  if found:
    return found
  raise PolygradConnectionError(
      "cannot reach polygradd at <embedded> (no daemon binary: set POLYGRAD_ADDRESS to a running "
      f"daemon, or POLYGRAD_DAEMON to a polygradd binary; looked for {repo_build} and PATH)")



def _set_parent_death_signal() -> None:  # runs in the child between fork and exec
  try:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: the daemon dies with its parent
  except Exception:
    pass



class EmbeddedDaemon:
  """A private polygradd on a Unix socket in a temporary directory."""

  def __init__(self, binary: Optional[str] = None, cache_dir: Optional[str] = None,
               extra_args: Sequence[str] = ()):
    self.binary = binary or find_daemon_binary()
    self.cache_dir = cache_dir or default_cache_dir()
    self.tmpdir = tempfile.mkdtemp(prefix="polygrad-")
    self.socket = os.path.join(self.tmpdir, "polygradd.sock")
    self.address = "unix:" + self.socket
    self.log_path = os.path.join(self.tmpdir, "polygradd.log")
    args = [self.binary, "--listen=", "--metrics-listen=", f"--unix-socket={self.socket}",
            f"--cache-dir={self.cache_dir}", *extra_args]
    # The parent-death signal is tied to the forking thread, so only use it from the main thread.
    preexec = (_set_parent_death_signal
               if sys.platform.startswith("linux") and threading.current_thread() is threading.main_thread()
               else None)
    self._log = open(self.log_path, "wb")
    try:
      self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self._log,
                                   stderr=subprocess.STDOUT, preexec_fn=preexec)
    except OSError as e:
      self._log.close()
      shutil.rmtree(self.tmpdir, ignore_errors=True)
      raise PolygradConnectionError(f"cannot reach polygradd at {self.address} "
                                    f"(cannot start {self.binary}: {e})") from e

  def log_tail(self, n: int = 2000) -> str:
    try:
      with open(self.log_path, "rb") as f:
        data = f.read()
      return data[-n:].decode("utf-8", "replace").strip()
    except OSError:
      return ""

  def wait_for_socket(self, deadline: float) -> None:
    """Wait until the socket file exists; fail early if the daemon exits."""
    while not os.path.exists(self.socket):
      rc = self.proc.poll()
      if rc is not None:
        raise PolygradConnectionError(
            f"cannot reach polygradd at {self.address} ({self.binary} exited with status {rc} "
            f"before listening; log: {self.log_tail() or '<empty>'})")
      if time.monotonic() > deadline:
        raise PolygradConnectionError(
            f"cannot reach polygradd at {self.address} (socket did not appear; log: "
            f"{self.log_tail() or '<empty>'})")
      time.sleep(0.02)

  def stop(self, timeout: float = 10.0) -> None:
    if self.proc.poll() is None:
      self.proc.terminate()
      try:
        self.proc.wait(timeout=timeout)
      except subprocess.TimeoutExpired:
        self.proc.kill()
        self.proc.wait()
    self._log.close()
    shutil.rmtree(self.tmpdir, ignore_errors=True)
