"""Asynchronous dispatch (clients/python/polygrad/dispatch.py, docs/PROTOCOL.md "Asynchronous
dispatch"): realize(), opt.step() and step.run() return while the daemon still works, reads and
synchronize() wait, failures surface there, and the numbers equal blocking dispatch's.

Work is held in flight by the held compiler (conftest.HeldCompiler): a realize that needs a new
kernel waits at its gate, so "returned while the daemon works" needs no timing. Each test that
holds runs its client in a process of its own against a daemon of its own.
"""
import contextlib
import json
import os
import re
import subprocess
import sys
import textwrap
import urllib.request

import numpy as np
import pytest

from conftest import PY_CLIENT, REPO, WAIT_LIMIT, Daemon, HeldCompiler, daemon_binary, free_port, quit_nginx, start_nginx, wait_until

from polygrad import PolygradInvalidArgument, Tensor, graph as g

pytestmark = pytest.mark.skipif(not daemon_binary().exists(), reason=f"no daemon binary at {daemon_binary()}")

# What every held-gate child starts with: the gate's controls, and a watchdog that opens the gate
# if the client blocks where it must not (the child then prints WATCHDOG and the test fails).
_PRELUDE = """
import os, sys, threading, time
from pathlib import Path
sys.path.insert(0, {client!r})
import numpy as np
from polygrad import Tensor, get_connection
gate = Path(os.environ["GATE"])
def hold(): (gate / "open").unlink(missing_ok=True)
def release(): (gate / "open").touch()
def held(): return sorted(gate.glob("held.*"))
def wait_held():
  # Polls until the daemon's compile reached the gate: the interval only sets how soon that is
  # seen; the bound (conftest's WAIT_LIMIT) is only for a real fault.
  deadline = time.monotonic() + {wait_limit}
  while not held():
    if time.monotonic() > deadline:
      raise SystemExit("no compile reached the held compiler")
    time.sleep(0.01)
def watchdog():
  print("WATCHDOG", flush=True)
  release()
dog = threading.Timer(300, watchdog)
dog.daemon = True
dog.start()
"""


@contextlib.contextmanager
def _held_daemon(tmp_path, metrics_listen: str = "", *args: str):
  """A daemon of this test's own compiling through the held compiler: (daemon, gate)."""
  cc = HeldCompiler(tmp_path)
  # --quick-compile=off: a realize waits for its held compile (a quick build would answer it).
  d = Daemon(daemon_binary(), tmp_path, metrics_listen, f"--compiler={cc.path}", "--quick-compile=off", *args)
  try:
    d.wait_ready()
    yield d, cc
  finally:
    cc.release()
    d.stop()


def _child(address: str, cc: HeldCompiler, body: str, **env):
  """Popen of a client process running _PRELUDE + body against `address`, dispatching as default."""
  child_env = dict(os.environ, POLYGRAD_ADDRESS=address, GATE=str(cc.gate), **env)
  child_env.pop("POLYGRAD_ASYNC", None)
  script = _PRELUDE.format(client=str(PY_CLIENT), wait_limit=WAIT_LIMIT) + textwrap.dedent(body)
  return subprocess.Popen([sys.executable, "-c", script], env=child_env, stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _run_held(tmp_path, body: str, **env) -> str:
  with _held_daemon(tmp_path) as (d, cc):
    child = _child(d.address, cc, body, **env)
    out, err = child.communicate(timeout=600)
    assert child.returncode == 0, err[-4000:] + d.log_tail()
    assert "WATCHDOG" not in out, "the client blocked while the daemon was held:\n" + out
    return out


# A realize held at the gate; once it is, "held" is printed and a line awaited on stdin while the
# test breaks the connection; then what synchronize() raised is printed.
_HELD_THEN_SYNCHRONIZE = """
    x = Tensor(np.ones(1024, dtype=np.float32))
    x.realize(); x.numpy()
    hold()
    y = (x * 9).realize()
    wait_held()
    print("held", flush=True)
    sys.stdin.readline()
    from polygrad import PolygradConnectionError
    try:
      Tensor.synchronize()
      print("no error")
    except PolygradConnectionError as e:
      print("raised", type(e).__name__, e)
"""


def _break_while_held(address: str, cc: HeldCompiler, cut) -> str:
  """Runs _HELD_THEN_SYNCHRONIZE, calling cut() once its realize is held; the child's output."""
  child = _child(address, cc, _HELD_THEN_SYNCHRONIZE)
  assert child.stdout.readline().strip() == "held"
  cut()
  out, err = child.communicate("go\n", timeout=300)
  assert child.returncode == 0, err
  return out


def test_realize_returns_while_the_daemon_computes(tmp_path):
  out = _run_held(tmp_path, """
      x = Tensor(np.arange(8, dtype=np.float32))
      x.realize(); x.numpy()          # connected, x on the daemon
      hold()
      y = (x * 3 + 1).realize()       # a new kernel: its compile waits at the gate
      z = (y - 1).realize()           # reads y, sent behind it
      wait_held()
      print("outstanding", get_connection().outstanding)
      release()
      print("z", z.numpy().tolist())
  """)
  assert "outstanding 2" in out, out
  assert f"z {(np.arange(8, dtype=np.float32) * 3).tolist()}" in out, out


def test_outstanding_commands_are_bounded(tmp_path):
  out = _run_held(tmp_path, """
      x = Tensor(np.ones(4, dtype=np.float32))
      x.realize(); x.numpy()
      hold()
      a = (x * 2).realize()
      b = (x * 3).realize()
      wait_held()
      third = threading.Thread(target=lambda: (x * 4).realize())
      third.start()
      third.join(timeout=1.0)
      # The bound is 2: the third waits for an answer (it stays blocked however long it is given).
      print("third blocked", third.is_alive(), get_connection().outstanding)
      release()
      third.join()
      print("values", a.numpy().tolist(), b.numpy().tolist())
  """, POLYGRAD_MAX_IN_FLIGHT="2")
  assert "third blocked True 2" in out, out
  assert "values [2.0, 2.0, 2.0, 2.0] [3.0, 3.0, 3.0, 3.0]" in out, out


def test_step_run_and_opt_step_return_while_the_daemon_computes(tmp_path):
  out = _run_held(tmp_path, """
      from polygrad.nn import SGD, Linear, compile_step, get_parameters
      rng = np.random.default_rng(0)
      x = Tensor(rng.random((16, 8), dtype=np.float32)).realize()
      y = Tensor(np.eye(4, dtype=np.float32)[rng.integers(0, 4, 16)]).realize()
      lin = Linear(8, 4)
      opt = SGD(get_parameters([lin]), lr=0.1)
      def train(opt, x, y):
        opt.zero_grad()
        loss = -(lin(x).log_softmax(-1) * y).sum(1).mean()
        loss.backward()
        opt.step()
        return loss
      step = compile_step(train, opt, x, y)
      step.run(); first = step.loss_value()
      hold()
      blocker = (x * 7).sum().realize()   # a new kernel, held: what comes next waits behind it
      step.run()                          # queued behind the held realize, and returns
      wait_held()
      print("outstanding", get_connection().outstanding)
      release()
      print("second loss below first", step.loss_value() < first)
  """)
  assert "outstanding 2" in out, out
  assert "second loss below first True" in out, out


def test_a_tinyjit_replay_returns_while_the_daemon_computes(tmp_path):
  """A replay is dispatched like step.run(): its outputs are filled in when its answer is settled,
  and the next replay is sent without settling the one before (answers are settled only by a
  read, a synchronize or the next realize, so the count does not depend on the daemon's speed)."""
  out = _run_held(tmp_path, """
      from polygrad import TinyJit
      w = Tensor(np.arange(4, dtype=np.float32)).realize()
      @TinyJit
      def f(x):
        w.assign(w + x).realize()
        return (w * 2).sum()
      x = Tensor(np.ones(4, dtype=np.float32)).realize()
      for _ in range(3):
        f(x).numpy()                      # eager, capture, replay: w is 3 + arange(4)
      Tensor.synchronize()
      a = f(x)                            # sent, not waited for
      b = f(x)                            # and the next one
      print("outstanding", get_connection().outstanding)
      from polygrad.graph import GRAPH
      requests = GRAPH.requests
      values = a.item(), b.item()           # they came with the answers: read without a Realize
      print("realizes to read", GRAPH.requests - requests)
      print("values", *values, w.numpy().tolist())
  """)
  assert "outstanding 2" in out, out
  assert "realizes to read 0" in out, out
  # w after 5 calls: arange(4) + 5; a saw it after 4, b after 5.
  assert f"values {float(2 * (np.arange(4) + 4).sum())} {float(2 * (np.arange(4) + 5).sum())} [5.0, 6.0, 7.0, 8.0]" in out, out


def test_a_killed_daemon_fails_what_was_outstanding(tmp_path):
  with _held_daemon(tmp_path) as (d, cc):
    def kill():
      d.proc.kill()
      d.proc.wait()
    out = _break_while_held(d.address, cc, kill)
  assert "raised PolygradConnectionError" in out, out


def test_a_stream_cut_mid_flight_fails_the_pending_work_and_leaks_nothing(tmp_path):
  """A proxy between client and daemon dies while a realize is in flight: the client's pending work
  fails with PolygradConnectionError, and the daemon, once the session it can no longer hear from
  idles out, holds no buffer of it (polygradd_buffers back to 0)."""
  with _held_daemon(tmp_path, "127.0.0.1:0", "--session-idle-timeout=1s") as (d, cc):
    url = d.metrics_url()
    if url is None:
      pytest.skip("this daemon does not report a /metrics URL in its log")

    def buffers() -> float:
      text = urllib.request.urlopen(url, timeout=10).read().decode()
      return float(re.search(r"^polygradd_buffers(?:{[^}]*})? (\S+)$", text, re.M).group(1))

    proxy = subprocess.Popen([sys.executable, str(REPO / "bench" / "latency_proxy.py"), "--to", d.address],
                             stdout=subprocess.PIPE, text=True)
    try:
      port = int(proxy.stdout.readline().split()[1])

      def cut():
        assert buffers() > 0
        proxy.kill()
        proxy.wait()
      out = _break_while_held(f"127.0.0.1:{port}", cc, cut)
    finally:
      if proxy.poll() is None:
        proxy.kill()
    assert "raised PolygradConnectionError" in out, out
    cc.release()  # the held realize finishes for a session nobody can reach any more
    wait_until(lambda: buffers() == 0, "the daemon to free the cut-off session's buffers", alive=d.proc)


def test_a_daemon_error_is_raised_by_the_next_read_or_synchronize(live_daemon):
  x = Tensor(np.zeros((3, 4), np.float32))
  # An equation only the daemon checks: the client sends it as it is.
  bad = Tensor._make(g.EINSUM, x.dtype, (3,), (x,), g.Composite(equation="ij->k"))
  bad.realize()
  behind = (bad + 1).realize()
  with pytest.raises(PolygradInvalidArgument, match=r"output label 'k' is not in any input"):
    Tensor.synchronize()
  Tensor.synchronize()  # raised once: nothing is outstanding any more
  assert (Tensor([1.0]) + 1).item() == 2.0
  # The failed nodes count as unsent again: a read sends them again and fails the same way.
  with pytest.raises(PolygradInvalidArgument, match=r"output label 'k' is not in any input"):
    behind.numpy()


def _train_losses(mode: str, address: str = "") -> list:
  """The losses of an eager and a compiled training loop; with `address`, through it."""
  return _train(mode, address)["losses"]


def _train(mode: str, address: str = "") -> dict:
  body = f"""
      import json, sys
      sys.path.insert(0, {str(PY_CLIENT)!r})
      import numpy as np
      from polygrad import Tensor
      from polygrad.nn import SGD, Adam, Linear, compile_step, get_parameters
      rng = np.random.default_rng(1)
      x = Tensor(rng.random((32, 12), dtype=np.float32))
      y = Tensor(np.eye(3, dtype=np.float32)[rng.integers(0, 3, 32)])
      l1, l2 = Linear(12, 16), Linear(16, 3)
      for layer, seed in ((l1, 2), (l2, 3)):
        r = np.random.default_rng(seed)
        layer.weight = Tensor(r.standard_normal(layer.weight.shape).astype(np.float32) * 0.3, requires_grad=True)
        layer.bias = Tensor(np.zeros(layer.bias.shape, np.float32), requires_grad=True)
      opt = Adam(get_parameters([l1, l2]), lr=0.01)
      losses = []
      for i in range(12):
        opt.zero_grad()
        loss = -(l2(l1(x).relu()).log_softmax(-1) * y).sum(1).mean()
        loss.backward()
        opt.step()
        if i % 4 == 3:
          losses.append(loss.item())
      def train(opt, x, y):
        opt.zero_grad()
        loss = -(l2(l1(x).relu()).log_softmax(-1) * y).sum(1).mean()
        loss.backward()
        opt.step()
        return loss
      step = compile_step(train, opt, x, y)
      for i in range(6):
        step.run()
      losses.append(step.loss_value())
      losses.append(float(l1.weight.numpy().astype(np.float64).sum()))
      from polygrad import get_connection
      conn = get_connection()
      print(json.dumps({{"losses": losses, "refused": conn._stream_refused, "outstanding": conn.outstanding}}))
  """
  env = dict(os.environ, POLYGRAD_ASYNC="0" if mode == "blocking" else "1")
  if address:
    env["POLYGRAD_ADDRESS"] = address
  r = subprocess.run([sys.executable, "-c", textwrap.dedent(body)], env=env, capture_output=True, text=True,
                     timeout=600)
  assert r.returncode == 0, r.stderr[-4000:]
  return json.loads(r.stdout.strip().splitlines()[-1])


def test_training_gives_the_same_numbers_with_either_dispatch(live_daemon):
  blocking, dispatched = _train_losses("blocking"), _train_losses("async")
  assert dispatched == blocking  # bit for bit: the same graphs in the same order


def _nginx_refusing_streams(tmp_path, upstream: str):
  """A real gRPC proxy (nginx's grpc_pass, cleartext HTTP/2) to `upstream` that answers the Execute
  stream with UNIMPLEMENTED, as proxies that pass only unary calls do: (process, port, access log)."""
  port = free_port()
  log = tmp_path / "nginx" / "access.log"
  proc = start_nginx(tmp_path / "nginx", port, textwrap.dedent(f"""
      log_format calls '$request_uri $status';
      access_log {log} calls;
      server {{
        listen 127.0.0.1:{port} http2;
        location = /polygrad.v1.Polygrad/Execute {{
          default_type application/grpc;
          add_header grpc-status 12 always;
          add_header grpc-message "this proxy passes unary calls only" always;
          return 200;
        }}
        location / {{
          grpc_pass unix:{upstream[len("unix:"):]};
          grpc_read_timeout 600s;
          grpc_send_timeout 600s;
          client_max_body_size 0;
        }}
      }}
  """))
  return proc, port, log


def test_a_proxy_that_refuses_streams_gets_every_call_unary(live_daemon, tmp_path):
  """Behind a proxy that answers Execute with UNIMPLEMENTED the client falls back to unary calls
  for everything, with the same numbers as blocking dispatch straight to the daemon."""
  proc, port, log = _nginx_refusing_streams(tmp_path, live_daemon.address)
  try:
    through = _train("async", f"127.0.0.1:{port}")
  finally:
    quit_nginx(proc)
  assert through["refused"] is True and through["outstanding"] == 0, through
  assert through["losses"] == _train_losses("blocking")
  calls = log.read_text().splitlines()
  assert "/polygrad.v1.Polygrad/Execute 200" in calls, calls[:20]  # asked once, refused
  assert sum(c.startswith("/polygrad.v1.Polygrad/Execute") for c in calls) == 1, calls
  assert sum(c.startswith("/polygrad.v1.Polygrad/Realize") for c in calls) >= 12, calls
  assert sum(c.startswith("/polygrad.v1.Polygrad/RunStep") for c in calls) == 6, calls
