#!/usr/bin/env bash
# The real binary: documents its flags, refuses a non-loopback bind, starts, logs one
# "listening" line, and drains and exits 0 on SIGTERM, removing its Unix socket.
set -euo pipefail
bin="$1"
tmp="$(mktemp -d)"
pid=""
cleanup() { [[ -n "$pid" ]] && kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [[ -f "$tmp/err" ]] && cat "$tmp/err" >&2; exit 1; }

help="$("$bin" --help 2>&1 || true)"
for flag in listen unix_socket metrics_listen cache_dir log_level log_format compiler threads \
            max_nodes_per_request max_rank max_elements max_inline_bytes max_message_bytes \
            max_sessions session_idle_timeout insecure_allow_remote tls_cert tls_key tls_client_ca \
            tokens_file max_graph_depth max_session_buffers max_session_bytes max_tenant_buffers \
            max_tenant_bytes max_tenant_sessions max_requests_in_flight quick_compile; do
  grep -q -- "--$flag" <<<"$help" || fail "--help does not document --$flag"
done

if "$bin" --listen=0.0.0.0:0 --unix-socket= --metrics-listen= --cache-dir="$tmp/c" 2>"$tmp/err"; then
  fail "a non-loopback --listen was accepted"
fi
grep -q "insecure-allow-remote" "$tmp/err" || fail "refusal does not name --insecure-allow-remote"
# Half a TLS configuration and an unreadable tokens file are refused with the flag named.
if "$bin" --tls-cert="$tmp/none.pem" --unix-socket= --metrics-listen= --cache-dir="$tmp/c" 2>"$tmp/err"; then
  fail "--tls-cert without --tls-key was accepted"
fi
grep -q -- "--tls-cert and --tls-key" "$tmp/err" || fail "refusal does not name --tls-key"
if "$bin" --tokens-file="$tmp/none" --listen=127.0.0.1:0 --unix-socket= --metrics-listen= --cache-dir="$tmp/c" \
     2>"$tmp/err"; then
  fail "a missing --tokens-file was accepted"
fi
grep -q -- "--tokens-file: cannot read" "$tmp/err" || fail "refusal does not name --tokens-file"

"$bin" --listen=127.0.0.1:0 --unix-socket="$tmp/d.sock" --metrics-listen= --cache-dir="$tmp/c" \
       --log-format=json 2>"$tmp/err" &
pid=$!
# Start-up takes well under a second idle (the compiler probe is most of it); the wait ends at
# the listening line or the daemon's exit, and its 120 s bound is far beyond a loaded machine.
for _ in $(seq 1200); do
  grep -q '"msg":"listening"' "$tmp/err" && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
grep -q '"msg":"listening"' "$tmp/err" || fail "no listening line"
[[ -S "$tmp/d.sock" ]] || fail "no unix socket"
# Every device is logged at start, CUDA with the reason it is (un)available.
grep -q '"msg":"device".*"name":"CPU".*"available":"true"' "$tmp/err" || fail "no CPU device line"
grep -Eq '"msg":"device".*"name":"CUDA".*"detail":"[^"]+' "$tmp/err" || fail "no CUDA device line with a reason"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=""
[[ $rc -eq 0 ]] || fail "exit code $rc after SIGTERM"
[[ ! -e "$tmp/d.sock" ]] || fail "socket left behind"
echo "ok"
