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


def progress_enabled(stream: Optional[IO[str]] = None) -> bool:
  """Whether a bar should be drawn on `stream` (default: sys.stderr)."""
  env = os.environ.get("POLYGRAD_PROGRESS", "").strip()
  if env == "0":
    return False
  if env == "1":
    return True
  stream = sys.stderr if stream is None else stream
  try:
    return bool(stream.isatty())
  except (AttributeError, ValueError):  # no isatty, or a closed stream
    return False


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
    if self.enabled and self._drawn:
      self._draw(time.monotonic())
      try:
        self.stream.write("\n")
        self.stream.flush()
      except (OSError, ValueError):
        pass
    self.enabled = False
