// node:test as the held-in test files meet it inside a page (test-browser/held-in.test.mjs bundles
// each file with this in node:test's place): test() and the before/after hooks register, and
// window.__heldIn.run(skips) runs them in order as node's runner does, one at a time, returning
// each test's outcome for the Node side to report under the test's own name.
const tests = [];
const hooks = { before: [], after: [] };

export default function test(name, options, fn) {
  if (typeof options === 'function') [options, fn] = [{}, options];
  tests.push({ name, options: options || {}, fn });
}
test.skip = (name, options, fn) => test(name, { ...(typeof options === 'object' ? options : {}), skip: true },
  typeof options === 'function' ? options : fn);
export { test };
export const before = (fn) => hooks.before.push(fn);
export const after = (fn) => hooks.after.push(fn);

const describeError = (e) => (e && e.stack ? String(e.stack) : String(e));

// skips: { name: reason } for tests that need what only Node has.
async function run(skips = {}) {
  const results = [];
  let setupError = null;
  for (const hook of hooks.before) {
    try { await hook(); } catch (e) { setupError = `before hook: ${describeError(e)}`; break; }
  }
  for (const t of tests) {
    const reason = skips[t.name] || (t.options.skip && String(t.options.skip));
    if (reason) {
      results.push({ name: t.name, status: 'skip', reason });
      continue;
    }
    if (setupError) {
      results.push({ name: t.name, status: 'fail', error: setupError });
      continue;
    }
    const diagnostics = [];
    let skipped = null;
    const ctx = {
      name: t.name,
      diagnostic: (m) => diagnostics.push(String(m)),
      skip: (m = '') => { skipped = String(m); },
    };
    const start = performance.now();
    try {
      await t.fn(ctx);
      results.push({ name: t.name, status: skipped !== null ? 'skip' : 'pass', reason: skipped, diagnostics,
        ms: performance.now() - start });
    } catch (e) {
      results.push({ name: t.name, status: 'fail', error: describeError(e), diagnostics });
    }
  }
  for (const hook of hooks.after) {
    try { await hook(); } catch (e) { results.push({ name: '(after hook)', status: 'fail', error: describeError(e) }); }
  }
  return results;
}

globalThis.__heldIn = { run, names: () => tests.map((t) => t.name) };
