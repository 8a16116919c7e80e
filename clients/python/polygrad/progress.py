"""A dependency-free progress bar on stderr, drawn only when stderr is a terminal.

POLYGRAD_PROGRESS=0 turns it off even on a terminal; POLYGRAD_PROGRESS=1 draws it even when
stderr is not one (for logs that want it). Pipes, files and test runners see nothing by default.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import IO, Optional

_WIDTH = 24
_open_bars = 0  # Progress bars on screen: a Waiting line would fight them for the same row


_tty_seen: tuple = (None, False)  # (stream, its isatty()): the last stream asked about


def progress_enabled(stream: Optional[IO[str]] = None) -> bool:
  """Whether a bar should be drawn on `stream` (default: sys.stderr)."""
  global _tty_seen
  env = os.environ.get("POLYGRAD_PROGRESS", "").strip()
  if env == "0":
    return False
  if env == "1":
    return True
  stream = sys.stderr if stream is None else stream
  # isatty() is a system call, and every realize asks (Waiting): a stream's answer is remembered
  # while it stays the one asked about.
  if _tty_seen[0] is stream:
    return _tty_seen[1]
  try:
    tty = bool(stream.isatty())
  except (AttributeError, ValueError):  # no isatty, or a closed stream
    return False
  _tty_seen = (stream, tty)
  return tty


class Progress:
  """`with Progress(total, "loading") as p: ... p.update(1, note)`. Redraws at most every
  0.1 s (and at the end), on one line ended by a newline when closed."""

  def __init__(self, total: int, desc: str, stream: Optional[IO[str]] = None,
               enabled: Optional[bool] = None, unit: str = ""):
    self.total = max(0, int(total))
    self.desc = desc
    self.unit = unit
    self.stream = sys.stderr if stream is None else stream
    self.enabled = progress_enabled(self.stream) if enabled is None else enabled
    self.n = 0
    self.note = ""
    self._start = time.monotonic()
    self._last_draw = 0.0
    self._drawn = False
    self._counted = self.enabled
    if self._counted:
      global _open_bars
      _open_bars += 1

  def __enter__(self) -> "Progress":
    return self

  def __exit__(self, *exc) -> None:
    self.close()

  def update(self, n: int = 1, note: str = "") -> None:
    self.n = min(self.total, self.n + n) if self.total else self.n + n
    self.note = note
    now = time.monotonic()
    if self.enabled and (now - self._last_draw >= 0.1 or self.n >= self.total):
      self._last_draw = now
      self._draw(now)

  def line(self, now: Optional[float] = None) -> str:
    """The bar as text: 'desc  50%|############            | 3/6 tok  1.2s note'."""
    now = time.monotonic() if now is None else now
    frac = self.n / self.total if self.total else 1.0
    full = int(round(frac * _WIDTH))
    unit = f" {self.unit}" if self.unit else ""
    note = f" {self.note}" if self.note else ""
    return (f"{self.desc} {int(frac * 100):3d}%|{'#' * full}{' ' * (_WIDTH - full)}| "
            f"{self.n}/{self.total}{unit} {now - self._start:.1f}s{note}")

  def _draw(self, now: float) -> None:
    try:
      self.stream.write("\r" + self.line(now)[:200] + "\x1b[K")
      self.stream.flush()
      self._drawn = True
    except (OSError, ValueError):
      self.enabled = False  # the terminal went away; the work itself goes on

  def close(self) -> None:
    global _open_bars
    if self._counted:
      self._counted = False
      _open_bars -= 1
    if self.enabled and self._drawn:
      self._draw(time.monotonic())
      try:
        self.stream.write("\n")
        self.stream.flush()
      except (OSError, ValueError):
        pass
    self.enabled = False


class Waiting:
  """`with Waiting("realizing 120 nodes"):` around one blocking call: when it lasts longer than
  POLYGRAD_PROGRESS_DELAY seconds (default 1) and a bar may be drawn, a line with the elapsed
  time is redrawn every 0.2 s ("polygradd: realizing 120 nodes (compiling kernels?) 3.4s") and
  erased when the call returns. The daemon reports what it compiled only at the end, so this
  shows that work goes on, not how much is left.

  One watcher thread per process draws the lines: every realize on a terminal waits in one of
  these, and starting a thread for each cost ~50 us, as much as the rest of a tiny realize's
  client work. One call's line at a time: a Waiting entered while another is open draws none."""

  def __init__(self, what: str, stream: Optional[IO[str]] = None):
    self.what = what
    self.stream = sys.stderr if stream is None else stream
    self.enabled = progress_enabled(self.stream) and _open_bars == 0
    self.start = 0.0
    self.delay = 1.0
    self.drawn = False
    self.open = False  # the watcher holds it: ended on exit even if its stream failed meanwhile

  def __enter__(self) -> "Waiting":
    if not self.enabled:
      return self
    try:
      self.delay = max(0.0, float(os.environ.get("POLYGRAD_PROGRESS_DELAY", "1")))
    except ValueError:
      self.delay = 1.0
    self.start = time.monotonic()
    self.open = _WATCHER.begin(self)
    self.enabled = self.open
    return self

  def draw(self) -> None:
    """Called with the watcher's lock held."""
    try:
      elapsed = time.monotonic() - self.start
      self.stream.write(f"\rpolygradd: {self.what} (compiling kernels?) {elapsed:.1f}s\x1b[K")
      self.stream.flush()
      self.drawn = True
    except (OSError, ValueError):
      self.enabled = False

  def __exit__(self, *exc) -> None:
    if self.open:
      _WATCHER.end(self)


class _Watcher:
  """The thread that draws the open Waiting's line; started on first use, and again in a child
  process after fork (threads do not survive it; see register_at_fork below)."""

  def __init__(self):
    self._cv = threading.Condition()
    self._job: Optional[Waiting] = None
    self._pid = None

  def begin(self, w: Waiting) -> bool:
    with self._cv:
      if self._job is not None:
        return False
      if self._pid != os.getpid():
        self._pid = os.getpid()
        threading.Thread(target=self._run, name="polygrad-waiting", daemon=True).start()
      self._job = w
      # A delay of 0 draws the line whatever the call's length: a call that answers before the
      # watcher wakes would otherwise draw nothing.
      if w.delay == 0:
        w.draw()
      self._cv.notify()
      return True

  def end(self, w: Waiting) -> None:
    with self._cv:
      if self._job is w:
        self._job = None
        self._cv.notify()
      if w.drawn:
        try:
          w.stream.write("\r\x1b[K")
          w.stream.flush()
        except (OSError, ValueError):
          pass

  def _run(self) -> None:
    with self._cv:
      while True:
        while self._job is None:
          self._cv.wait()
        w = self._job
        if not w.enabled:  # its stream failed: nothing more to draw until it ends
          while self._job is w:
            self._cv.wait()
          continue
        wake = w.start + w.delay if not w.drawn else time.monotonic() + 0.2
        while self._job is w and time.monotonic() < wake:
          self._cv.wait(wake - time.monotonic())
        if self._job is w and w.enabled:
          w.draw()


_WATCHER = _Watcher()
# A child process starts afresh: the parent's watcher thread is not in it, and its lock may have
# been held (by a draw) at the fork.
if hasattr(os, "register_at_fork"):
  os.register_at_fork(after_in_child=_WATCHER.__init__)
