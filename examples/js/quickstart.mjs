// Quick start: a lazy graph built synchronously, read back with await.
// Run: node examples/js/quickstart.mjs (from the repository root, after `npm ci` in clients/js).
import { Tensor } from 'polygrad';

Tensor.manualSeed(0);
const a = Tensor.rand(64, 32);
const b = Tensor.rand(32, 16);
const c = a.matmul(b).softmax(-1); // lazy: nothing has run yet; c.shape is known locally
console.log(c.shape); // [ 64, 16 ]
const rows = await c.sum({ axis: 1 }).data(); // one request: compiled once, cached
console.log(rows.slice(0, 4)); // Float32Array [ 1, 1, 1, 1 ] (up to rounding)
