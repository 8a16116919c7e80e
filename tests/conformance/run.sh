#!/usr/bin/env bash
# Runs the cross-client conformance corpus (tests/conformance/cases.json) from every client against
# ONE daemon this script starts, so the clients' bytes can be compared: Python first (it writes
# <out>/python.json), then JavaScript and R (each compares its bytes with python.json). Every
# runner runs even when an earlier one failed; the exit status is 1 when any failed.
#
#   tests/conformance/run.sh
#
# Environment:
#   POLYGRAD_TEST_DAEMON       the polygradd binary (default: <repo>/build/polygradd)
#   POLYGRAD_CONFORMANCE_OUT   where the results go (default: a temp dir, removed afterwards)
#   POLYGRAD_DAEMON_ARGS       extra daemon flags (e.g. --devices=cpu,cuda:0)
#   POLYGRAD_JS_CLIENT         the JavaScript package's directory (default: <repo>/clients/js)
#   POLYGRAD_R_LIB             the R library holding the polygrad package (default: <repo>/build/r-lib)
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root" || exit 1
daemon=${POLYGRAD_TEST_DAEMON:-$root/build/polygradd}
if [[ ! -x $daemon ]]; then
  echo "conformance: no daemon binary at $daemon (build it first: scripts/build build)"
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/polygrad-conformance.XXXXXX")
out=${POLYGRAD_CONFORMANCE_OUT:-$work/out}
mkdir -p "$out"
daemon_pid=

# Runs from the EXIT trap (shellcheck cannot see that).
# shellcheck disable=SC2317
cleanup() {
  if [[ -n $daemon_pid ]] && kill -0 "$daemon_pid" 2>/dev/null; then
    kill -TERM "$daemon_pid"
    # polygradd drains and exits on SIGTERM; a daemon that hangs must not hang the suite.
    for _ in $(seq 150); do
      kill -0 "$daemon_pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$daemon_pid" 2>/dev/null
    wait "$daemon_pid" 2>/dev/null
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

socket=$work/d.sock
# A kernel cache of its own in the temp dir, so the run neither depends on nor fills the user's.
# shellcheck disable=SC2086  # POLYGRAD_DAEMON_ARGS is a list of flags
"$daemon" --listen= --metrics-listen= --unix-socket="$socket" --cache-dir="$work/cache" \
  ${POLYGRAD_DAEMON_ARGS:-} >"$work/polygradd.log" 2>&1 &
daemon_pid=$!

# Ready when the socket exists (the daemon creates it once it serves); give up if it exits. The
# 120 s bound is for a start that hangs: start-up takes well under a second.
for _ in $(seq 1200); do
  [[ -S $socket ]] && break
  if ! kill -0 "$daemon_pid" 2>/dev/null; then
    echo "conformance: $daemon exited before serving:"
    cat "$work/polygradd.log"
    exit 1
  fi
  sleep 0.1
done
if [[ ! -S $socket ]]; then
  echo "conformance: $daemon did not create $socket within 120 s:"
  cat "$work/polygradd.log"
  exit 1
fi

export POLYGRAD_ADDRESS=unix:$socket
export POLYGRAD_CONFORMANCE_OUT=$out
unset POLYGRAD_TOKEN POLYGRAD_TLS_CA

rc=0
echo "conformance: python client (daemon $daemon, results in $out)"
PYTHONPATH="$root/clients/python${PYTHONPATH:+:$PYTHONPATH}" \
  /usr/bin/python3 -m pytest -q -rs -p no:cacheprovider tests/conformance/test_conformance_python.py || rc=1

js_dir=${POLYGRAD_JS_CLIENT:-$root/clients/js}
echo "conformance: javascript client ($js_dir)"
if [[ ! -f $js_dir/package.json ]]; then
  echo "conformance: $js_dir/package.json does not exist: the JavaScript half cannot run"
  rc=1
elif ! command -v node >/dev/null; then
  echo "conformance: node is not installed (Debian: apt-get install nodejs npm)"
  rc=1
else
  if [[ ! -d $js_dir/node_modules ]]; then
    (cd "$js_dir" && npm ci --no-audit --no-fund) || rc=1
  fi
  # The dot reporter: one character per case, then each failure in full.
  POLYGRAD_JS_CLIENT=$js_dir node --test --test-reporter=dot tests/conformance/conformance.test.mjs || rc=1
fi

# The R client builds every case (one it cannot build fails); it reads the package from
# POLYGRAD_R_LIB (default build/r-lib, where scripts/test's r suite installs it).
r_lib=${POLYGRAD_R_LIB:-$root/build/r-lib}
echo "conformance: r client ($r_lib)"
if ! command -v Rscript >/dev/null; then
  echo "conformance: Rscript is not installed (Debian: apt-get install r-base-core)"
  rc=1
elif [[ ! -d $r_lib/polygrad ]]; then
  echo "conformance: the R package is not installed in $r_lib (R CMD INSTALL -l $r_lib clients/r)"
  rc=1
else
  R_LIBS="$r_lib" Rscript tests/conformance/conformance_r.R || rc=1
fi

if ! kill -0 "$daemon_pid" 2>/dev/null; then
  echo "conformance: the daemon exited during the run (its log follows)"
  rc=1
fi
if [[ $rc -ne 0 ]]; then
  echo "---- polygradd log (last 60 lines) ----"
  tail -n 60 "$work/polygradd.log"
fi
exit "$rc"
