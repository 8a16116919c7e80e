// Shared by the gRPC-Web tests (test/web, test/browser, test-browser/): the web address a daemon
// logged, and a small training run whose losses every transport must reproduce.
import assert from 'node:assert/strict';

// The daemon's gRPC-Web address (startDaemon waited for it in the log; it picks the port for :0).
export function webAddress(d) {
  assert.ok(d.web, 'the daemon was started without --web-listen');
  return d.web;
}

// Losses of 6 SGD steps of a 16-8-3 MLP from fixed weights and data, with `pg` (a client module).
// Self-contained (no outer names), so a test can also run its source inside a page.
export async function mlpLosses(pg, address) {
  await pg.connect({ address });
  const w1 = pg.Tensor.from(Float32Array.from({ length: 128 }, (_, i) => Math.sin(i) * 0.3), { shape: [8, 16] });
  const w2 = pg.Tensor.from(Float32Array.from({ length: 24 }, (_, i) => Math.cos(i) * 0.3), { shape: [3, 8] });
  const l1 = new pg.nn.Linear(16, 8);
  const l2 = new pg.nn.Linear(8, 3);
  await pg.nn.loadStateDict({ l1, l2 }, { 'l1.weight': w1, 'l1.bias': pg.Tensor.zeros(8), 'l2.weight': w2, 'l2.bias': pg.Tensor.zeros(3) });
  const opt = new pg.nn.SGD(pg.nn.getParameters({ l1, l2 }), { lr: 0.1 });
  const x = pg.Tensor.from(Float32Array.from({ length: 64 }, (_, i) => ((i * 7) % 11) / 11 - 0.5), { shape: [4, 16] });
  const y = pg.Tensor.from([0, 2, 1, 2]);
  const out = [];
  for (let i = 0; i < 6; i++) {
    const loss = l2.forward(l1.forward(x).relu()).crossEntropy(y);
    opt.zeroGrad();
    loss.backward();
    await opt.step();
    out.push(await loss.item());
  }
  return out;
}
