"""Tuning shared through the kernel cache (issue 21, acceptance 4): a daemon run with --tune=search
times the candidate tilings of its reduce kernels and stores the winners in its cache directory; a
second daemon on that directory (the default --tune=cached) uses them with no search, which its
/metrics counts. Real daemons, real compiles; nothing here depends on which tiling wins.
"""
import os
import re
import subprocess
import sys

import pytest

from conftest import PY_CLIENT, daemon_binary
from test_kernel_cache import CacheDaemon

# A matmul, a row sum and a column sum: three reduce kernels, each checked against numpy.
SCRIPT = """
import sys
sys.path.insert(0, {client!r})
import numpy as np
from polygrad import Tensor
rng = np.random.default_rng(0)
a = rng.standard_normal((48, 64)).astype(np.float32)
b = rng.standard_normal((64, 40)).astype(np.float32)
np.testing.assert_allclose((Tensor(a) @ Tensor(b)).numpy(), a @ b, rtol=1e-4, atol=1e-4)
np.testing.assert_allclose(Tensor(a).sum(axis=1).numpy(), a.sum(axis=1), rtol=1e-4, atol=1e-4)
np.testing.assert_allclose(Tensor(a).sum(axis=0).numpy(), a.sum(axis=0), rtol=1e-4, atol=1e-4)
print("ok")
"""


def run_script(d: CacheDaemon) -> None:
  env = dict(os.environ, POLYGRAD_ADDRESS=d.address)
  r = subprocess.run([sys.executable, "-c", SCRIPT.format(client=str(PY_CLIENT))], env=env, capture_output=True,
                     text=True, timeout=300)
  assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]


def tuning(d: CacheDaemon, result: str) -> float:
  """polygradd_kernel_tuning_total{result=...} from the daemon's /metrics."""
  text = d.metrics_text()
  found = re.search(rf'^polygradd_kernel_tuning_total{{result="{result}"}} (\S+)$', text, re.M)
  assert found, text[-2000:]
  return float(found.group(1))


def test_a_second_daemon_uses_the_first_ones_tuning_with_no_search(tmp_path):
  cache = tmp_path / "cache"
  a = CacheDaemon(tmp_path, "a", cache, "--tune=search")
  try:
    run_script(a)
    searched = tuning(a, "search")
    assert searched >= 1
    assert tuning(a, "hit") == 0 and tuning(a, "miss") == 0
  finally:
    a.stop()

  b = CacheDaemon(tmp_path, "b", cache)  # --tune=cached is the default
  try:
    run_script(b)
    assert tuning(b, "search") == 0
    assert tuning(b, "hit") == searched
    assert tuning(b, "miss") == 0
  finally:
    b.stop()


def test_without_stored_tuning_the_default_searches_nothing_and_off_looks_nothing_up(tmp_path):
  d = CacheDaemon(tmp_path, "cached", tmp_path / "cache")
  try:
    run_script(d)
    assert tuning(d, "miss") >= 1
    assert tuning(d, "search") == 0 and tuning(d, "hit") == 0
  finally:
    d.stop()
  off = CacheDaemon(tmp_path, "off", tmp_path / "cache2", "--tune=off")
  try:
    run_script(off)
    assert tuning(off, "miss") == tuning(off, "hit") == tuning(off, "search") == 0
  finally:
    off.stop()


def test_an_unknown_tune_mode_stops_the_daemon_at_start(tmp_path):
  binary = daemon_binary()
  if not binary.exists():
    pytest.skip(f"no daemon binary at {binary}")
  r = subprocess.run([str(binary), "--listen=127.0.0.1:0", "--tune=fast"], capture_output=True, text=True, timeout=60)
  assert r.returncode != 0
  assert "--tune must be off, cached or search, not 'fast'" in r.stderr


def matmul_manifest():
  """One graph, the script's matmul shape: its BUFFER nodes carry shapes only (the daemon feeds zeros)."""
  from polygrad.v1 import admin_pb2, polygrad_pb2 as pb
  m = admin_pb2.PrewarmManifest()
  g = m.graphs.add(name="matmul", outputs=[3])
  g.nodes.extend([pb.Node(id=1, op=pb.BUFFER, dtype=pb.FLOAT32, buffer=pb.BufferSource(shape=[48, 64])),
                  pb.Node(id=2, op=pb.BUFFER, dtype=pb.FLOAT32, buffer=pb.BufferSource(shape=[64, 40])),
                  pb.Node(id=3, op=pb.MATMUL, src=[1, 2])])
  return m


def test_an_admin_prewarm_with_tune_searches_for_every_daemon_on_the_cache(tmp_path):
  from polygrad import admin as admin_client
  cache = tmp_path / "cache"
  a = CacheDaemon(tmp_path, "a", cache)
  try:
    with admin_client.Admin(a.address) as adm:
      r = adm.prewarm(matmul_manifest(), timeout=300, tune=True)
    assert r.graphs == 1 and r.kernels >= 1
    assert tuning(a, "search") == 1
  finally:
    a.stop()
  b = CacheDaemon(tmp_path, "b", cache)
  try:
    run_script(b)  # its matmul finds the prewarm's choice; its two sums find none
    assert tuning(b, "hit") == 1
    assert tuning(b, "search") == 0
  finally:
    b.stop()
