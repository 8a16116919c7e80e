"""A dependency-free progress bar on stderr, drawn only when stderr is a terminal.

POLYGRAD_PROGRESS=0 turns it off even on a terminal; POLYGRAD_PROGRESS=1 draws it even when
stderr is not one (for logs that want it). Pipes, files and test runners see nothing by default.
"""
from __future__ import annotations

import os
import sys
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
  shows that work goes on, not how much is left."""

  def __init__(self, what: str, stream: Optional[IO[str]] = None):
    self.what = what
    self.stream = sys.stderr if stream is None else stream
    self.enabled = progress_enabled(self.stream) and _open_bars == 0
    self._stop = None
    self._thread = None

  def __enter__(self) -> "Waiting":
    if not self.enabled:
      return self
    import threading
    try:
      delay = max(0.0, float(os.environ.get("POLYGRAD_PROGRESS_DELAY", "1")))
    except ValueError:
      delay = 1.0
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._run, args=(delay,), name="polygrad-waiting", daemon=True)
    self._thread.start()
    return self

  def _run(self, delay: float) -> None:
    start = time.monotonic()
    # A delay of 0 draws the line whatever the call's length: waiting on the event first would let
    # a call that answers before this thread runs draw nothing.
    if delay > 0 and self._stop.wait(delay):
      return
    drawn = False
    while True:
      try:
        self.stream.write(f"\rpolygradd: {self.what} (compiling kernels?) {time.monotonic() - start:.1f}s\x1b[K")
        self.stream.flush()
        drawn = True
      except (OSError, ValueError):
        return
      if self._stop.wait(0.2):
        break
    if drawn:
      try:
        self.stream.write("\r\x1b[K")
        self.stream.flush()
      except (OSError, ValueError):
        pass

  def __exit__(self, *exc) -> None:
    if self._thread is not None:
      self._stop.set()
      self._thread.join()
