#!/bin/sh
# Fills the remote kernel-cache tier from a manifest, then exits: the prewarm Job (deploy/k8s) and
# the one-shot `prewarm` service (deploy/docker-compose.yml) run it in the polygradd image.
#
#   prewarm.sh MANIFEST [polygradd flags: --cache-remote=URL --cache-remote-key-file=PATH ...]
#
# polygradd has no run-once mode, so this starts one with --prewarm=MANIFEST and an empty local
# cache (every kernel is then looked up in the remote tier, and only the missing ones are compiled
# and uploaded), waits for its "prewarm finished" log line (the same moment its health turns
# SERVING), and stops it with SIGTERM. Uploads run in the background, so this relies on the
# daemon's graceful stop finishing the uploads it has queued (within --shutdown-grace) before it
# exits; the exit status is the daemon's. No port is opened (--listen= --metrics-listen=).
set -eu
manifest=$1
shift
work=$(mktemp -d)
log=$work/polygradd.log
polygradd --listen= --metrics-listen= --unix-socket="$work/d.sock" --cache-dir="$work/cache" \
  --prewarm="$manifest" "$@" >"$log" 2>&1 &
pid=$!
status=0
while :; do
  if grep -q "prewarm finished" "$log"; then
    break
  fi
  if grep -q "prewarm failed" "$log" || ! kill -0 "$pid" 2>/dev/null; then
    status=1
    break
  fi
  sleep 1  # a poll of a log file: how soon the loop notices, nothing depends on it
done
kill -TERM "$pid" 2>/dev/null || true
wait "$pid" || status=1
cat "$log"
rm -rf "$work"
exit "$status"
