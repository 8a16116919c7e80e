#!/usr/bin/env bash
# Builds polygrad and runs the GPU suite (tests/gpu) against a daemon started with
# --devices=cpu,cuda:0, on CUDA (POLYGRAD_GPU_DEVICES=cpu,cuda runs it on the CPU as well).
#
#   tests/gpu/run.sh [pytest args...]
#
# POLYGRAD_DAEMON names a prebuilt daemon to use instead of building one (a GPU machine lent
# without a toolchain gets the binary built elsewhere), and POLYGRAD_PYTHON the interpreter
# (default /usr/bin/python3, Debian's, which sees python3-torch).
#
# Exits non-zero when any test fails, and also when the suite could not run on a GPU (the daemon
# refuses --devices=cuda:0 without one, or a test skipped with "CUDA unavailable"), so a machine
# without a usable GPU can never pass it silently.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root" || exit 1

daemon=${POLYGRAD_DAEMON:-}
python=${POLYGRAD_PYTHON:-/usr/bin/python3}
if [[ -z "$daemon" ]]; then
  "$root/scripts/build" build || { echo "tests/gpu/run.sh: build failed"; exit 1; }
  daemon="$root/build/polygradd"
fi

# The daemon refuses --devices=cuda:0 at start without a usable GPU: say so once, in its words,
# instead of one error per test.
probe_dir=$(mktemp -d /tmp/polygrad-gpu-probe.XXXXXX)
"$daemon" --devices=cpu,cuda:0 --listen= --metrics-listen= --unix-socket="$probe_dir/d.sock" \
  --cache-dir="$probe_dir/cache" >"$probe_dir/log" 2>&1 &
probe=$!
# Waits for the socket or the daemon's exit; the 120 s bound is for a start that hangs, far past
# the seconds CUDA's initialisation takes.
for _ in $(seq 1200); do
  [[ -S "$probe_dir/d.sock" ]] && break
  kill -0 "$probe" 2>/dev/null || break
  sleep 0.1
done
if [[ ! -S "$probe_dir/d.sock" ]]; then
  wait "$probe" 2>/dev/null
  echo "tests/gpu/run.sh: polygradd --devices=cpu,cuda:0 did not start, so there is no GPU run here:"
  cat "$probe_dir/log"
  rm -rf "$probe_dir"
  exit 1
fi
kill "$probe" 2>/dev/null
wait "$probe" 2>/dev/null
rm -rf "$probe_dir"

report=$(mktemp /tmp/polygrad-gpu-suite.XXXXXX.xml)
trap 'rm -f "$report"' EXIT
rc=0
env -u POLYGRAD_ADDRESS \
  POLYGRAD_DAEMON="$daemon" \
  POLYGRAD_TEST_DAEMON="$daemon" \
  POLYGRAD_DAEMON_ARGS="--devices=cpu,cuda:0" \
  PYTHONPATH="$root/clients/python${PYTHONPATH:+:$PYTHONPATH}" \
  timeout --kill-after=30 3600 "$python" -m pytest -q -rs -p no:cacheprovider --junitxml="$report" \
  tests/gpu "$@" || rc=$?

if grep -q "CUDA unavailable" "$report" 2>/dev/null; then
  echo "tests/gpu/run.sh: tests skipped because CUDA is unavailable: this is not a GPU pass"
  [[ $rc -eq 0 ]] && rc=1
fi
if [[ $rc -eq 0 ]] && ! grep -q '<testcase' "$report"; then
  echo "tests/gpu/run.sh: no test ran"
  rc=1
fi
echo "tests/gpu/run.sh: exit $rc"
exit "$rc"
