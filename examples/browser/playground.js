// The playground page (served by polygradd --web-listen ... --web-playground=examples/browser, or
// from any web server whose origin the daemon allows): runs a small program against the daemon
// through the browser build (window.polygrad), plots the loss live and shows what the daemon did.
'use strict';

const EXAMPLES = {
  'matmul + softmax': `pg.Tensor.manualSeed(0);
const a = pg.Tensor.randn(4, 6);
const b = pg.Tensor.randn(6, 3);
await show('a', a);
await show('softmax(a @ b)', a.matmul(b).softmax(-1));`,
  'MLP on two moons': `// Two interleaved half circles, 200 points, classified by a 2-16-2 MLP with Adam.
let seed = 1;
const noise = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648 - 0.5) * 0.2;
const n = 200, X = new Float32Array(n * 2), Y = new Int32Array(n);
for (let i = 0; i < n; i++) {
  const t = Math.PI * (i % 100) / 99, upper = i < 100;
  X[2 * i] = (upper ? Math.cos(t) : 1 - Math.cos(t)) + noise();
  X[2 * i + 1] = (upper ? Math.sin(t) : 0.5 - Math.sin(t)) + noise();
  Y[i] = upper ? 0 : 1;
}
const x = pg.Tensor.from(X, { shape: [n, 2] }), y = pg.Tensor.from(Y);
pg.Tensor.manualSeed(0);
const l1 = new pg.nn.Linear(2, 16), l2 = new pg.nn.Linear(16, 2);
const model = (t) => l2.forward(l1.forward(t).tanh());
const opt = new pg.nn.Adam(pg.nn.getParameters({ l1, l2 }), { lr: 0.05 });
for (let step = 0; step < 120; step++) {
  const loss = model(x).crossEntropy(y);
  opt.zeroGrad();
  loss.backward();
  await opt.step();
  plot(await loss.item());
}
await show('accuracy', model(x).argmax(-1).eq(y).float().mean());`,
};

const $ = (id) => document.getElementById(id);
const state = { losses: [], done: false, error: null, runs: 0 };
window.playground = state;

function drawPlot() {
  const canvas = $('plot');
  const g = canvas.getContext('2d');
  const w = canvas.width, h = canvas.height, pad = 34;
  g.clearRect(0, 0, w, h);
  g.strokeStyle = '#c9ced6';
  g.strokeRect(pad, 8, w - pad - 8, h - pad - 8);
  const ys = state.losses;
  if (!ys.length) return;
  const hi = Math.max(...ys), lo = Math.min(0, ...ys);
  g.fillStyle = '#555';
  g.font = '11px sans-serif';
  g.fillText(hi.toPrecision(3), 2, 16);
  g.fillText(lo.toPrecision(3), 2, h - pad);
  g.fillText(`step ${ys.length}`, w - 70, h - 10);
  g.strokeStyle = '#2f6fde';
  g.lineWidth = 2;
  g.beginPath();
  ys.forEach((v, i) => {
    const px = pad + (w - pad - 8) * (ys.length === 1 ? 0 : i / (ys.length - 1));
    const py = 8 + (h - pad - 16) * (1 - (v - lo) / (hi - lo || 1));
    if (i === 0) g.moveTo(px, py); else g.lineTo(px, py);
  });
  g.stroke();
}

async function show(name, tensor) {
  const values = Array.from(await tensor.data());
  const shape = tensor.shape;
  const rows = shape.length >= 2 ? shape[shape.length - 2] : 1;
  const cols = shape.length >= 1 ? shape[shape.length - 1] : 1;
  const div = document.createElement('div');
  div.innerHTML = `<div class="name"></div><table></table>`;
  div.querySelector('.name').textContent = `${name}  [${shape.join(', ')}] ${tensor.dtype}`;
  const table = div.querySelector('table');
  for (let r = 0; r < Math.min(rows, 12); r++) {
    const tr = table.insertRow();
    for (let c = 0; c < Math.min(cols, 10); c++) {
      const v = values[r * cols + c];
      tr.insertCell().textContent = Number.isInteger(v) ? String(v) : v.toFixed(4);
    }
  }
  $('out').appendChild(div);
}

function plot(loss) {
  state.losses.push(loss);
  drawPlot();
}

function showStats(before, after, seconds) {
  const d = (k) => after.realized[k] - before.realized[k];
  const rows = [['requests', after.requests - before.requests], ['kernels launched', d('kernels')],
    ['kernels compiled (cache misses)', d('compiled')], ['kernel-cache hits', d('cacheHits')],
    ['time in the daemon', `${(d('seconds') * 1000).toFixed(1)} ms`], ['wall time', `${(seconds * 1000).toFixed(0)} ms`]];
  const table = $('stats');
  table.innerHTML = '';
  for (const [k, v] of rows) {
    const tr = table.insertRow();
    tr.insertCell().textContent = k;
    tr.insertCell().textContent = String(v);
  }
}

async function run() {
  const pg = window.polygrad;
  state.losses = [];
  state.done = false;
  state.error = null;
  $('out').innerHTML = '';
  drawPlot();
  $('status').className = '';
  $('status').textContent = 'running…';
  $('run').disabled = true;
  try {
    await pg.connect({ address: $('address').value, token: $('token').value || undefined });
    const before = pg.graphStats();
    const t0 = performance.now();
    const AsyncFunction = Object.getPrototypeOf(async () => {}).constructor;
    await new AsyncFunction('pg', 'show', 'plot', $('code').value)(pg, show, plot);
    await pg.synchronize();
    showStats(before, pg.graphStats(), (performance.now() - t0) / 1000);
    $('status').textContent = 'done';
  } catch (e) {
    state.error = `${e.name}: ${e.message}`;
    $('status').className = 'error';
    $('status').textContent = state.error;
  } finally {
    state.done = true;
    state.runs += 1;
    $('run').disabled = false;
  }
}

for (const name of Object.keys(EXAMPLES)) $('example').add(new Option(name, name));
$('example').addEventListener('change', () => { $('code').value = EXAMPLES[$('example').value]; });
$('code').value = EXAMPLES[$('example').value];
$('address').value = location.protocol.startsWith('http') ? location.origin : 'http://127.0.0.1:8080';
$('run').addEventListener('click', run);
drawPlot();
