// test/daemon.mjs as the held-in test files meet it inside a page: the daemon is the Node side's
// (started there with the file's own options plus a gRPC-Web port that allows this page's origin),
// and `address` is that port, the only one a page can reach.
export const WAIT_LIMIT_MS = 120000;

export async function startDaemon(options = {}) {
  const d = await globalThis.__pgHostStartDaemon(options);
  return {
    ...d,
    address: d.web,
    async stop() { await globalThis.__pgHostStopDaemon(d.id); },
    async kill() { await globalThis.__pgHostStopDaemon(d.id); },
  };
}

// /metrics is on another port without CORS: the Node side reads it.
export async function gauge(url, name) {
  return globalThis.__pgHostGauge(url, name);
}
