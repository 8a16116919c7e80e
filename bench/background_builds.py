"""Waiting for the daemon's background builds, shared by the timing scripts (bench.py, ab_bench.py)."""
import time


def wait_for_background_builds():
  """The optimized builds a first run started behind quick ones (--quick-compile) land before
  timing, so a row measures the kernels a warm daemon runs, not TinyCC's. Polls the admin
  CacheStats; a benchmark may wait, a test may not."""
  from polygrad.admin import Admin
  from polygrad.connection import get_connection
  with Admin(get_connection().address) as adm:
    deadline = time.monotonic() + 600
    while adm.cache_stats().background_builds and time.monotonic() < deadline:
      time.sleep(0.05)
