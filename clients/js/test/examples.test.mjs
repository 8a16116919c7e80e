// The README's JavaScript quick start (install line and code, verbatim) and examples/js run against
// a daemon of this file's own, and the TypeScript example type-checks against index.d.ts.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { startDaemon, REPO } from './daemon.mjs';

const PKG = path.join(REPO, 'clients', 'js');
const EXAMPLES = path.join(REPO, 'examples', 'js');

let daemon;
before(async () => {
  daemon = await startDaemon();
  // What `npm install ../../clients/js` makes: a link to the package.
  fs.mkdirSync(path.join(EXAMPLES, 'node_modules'), { recursive: true });
  const link = path.join(EXAMPLES, 'node_modules', 'polygrad');
  fs.rmSync(link, { force: true, recursive: true });
  fs.symlinkSync(path.relative(path.dirname(link), PKG), link);
});
after(async () => {
  await daemon.stop();
});

function run(cmd, args, { cwd, env = {} } = {}) {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd, env: { ...process.env, POLYGRAD_ADDRESS: daemon.address, ...env }, maxBuffer: 1 << 24 },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`${cmd} ${args.join(' ')} failed: ${err.message}\n${stdout}\n${stderr}`));
        else resolve(stdout);
      });
  });
}

function readmeSection() {
  const readme = fs.readFileSync(path.join(REPO, 'README.md'), 'utf8');
  const start = readme.indexOf('## Using it from JavaScript');
  assert.ok(start >= 0, 'README.md has a JavaScript section');
  const end = readme.indexOf('\n## ', start + 1);
  return readme.slice(start, end < 0 ? undefined : end);
}

function block(section, lang) {
  const m = section.match(new RegExp('```' + lang + '\\n([\\s\\S]*?)```'));
  assert.ok(m, `the JavaScript section has a ${lang} block`);
  return m[1];
}

test('the README\'s JavaScript install line and quick start run verbatim', async () => {
  const section = readmeSection();
  const lines = block(section, 'sh').split('\n').map((l) => l.replace(/#.*$/, '').trim()).filter(Boolean);
  const install = lines.find((l) => l.startsWith('npm install '));
  assert.ok(install, 'an npm install line');
  const project = fs.mkdtempSync(path.join(daemon.dir, 'project-'));
  const argv = install.replace('/path/to/polygrad', REPO).split(/\s+/);
  // --offline: the package's own dependencies are already in clients/js/node_modules (npm ci)
  await run(argv[0], [...argv.slice(1), '--offline', '--no-audit', '--no-fund'], { cwd: project });
  fs.writeFileSync(path.join(project, 'quickstart.mjs'), block(section, 'js'));
  const out = await run(process.execPath, ['quickstart.mjs'], { cwd: project });
  assert.match(out, /\[ 64, 16 \]/);
  const loss = Number(out.match(/loss ([\d.e-]+)/)[1]);
  assert.ok(loss < 1, `the quick start's model trained (loss ${loss})`);
});

test('examples/js/quickstart.mjs runs', async () => {
  const out = await run(process.execPath, [path.join(EXAMPLES, 'quickstart.mjs')], { cwd: REPO });
  assert.match(out, /\[ 64, 16 \]/);
});

test('examples/js/mlp_training.mjs trains', async () => {
  const out = await run(process.execPath, [path.join(EXAMPLES, 'mlp_training.mjs')], { cwd: REPO });
  assert.match(out, /accuracy /);
});

test('examples/js/*.ts type-check against index.d.ts (tsc --noEmit), and compiled_step.ts runs', async () => {
  const tsc = path.join(PKG, 'node_modules', 'typescript', 'bin', 'tsc');
  await run(process.execPath, [tsc, '--noEmit', '-p', EXAMPLES], { cwd: PKG });
  const out = path.join(EXAMPLES, 'build');
  fs.rmSync(out, { recursive: true, force: true });
  await run(process.execPath, [tsc, '-p', EXAMPLES, '--outDir', out], { cwd: PKG });
  fs.writeFileSync(path.join(out, 'package.json'), '{"type": "module"}\n');
  const stdout = await run(process.execPath, [path.join(out, 'compiled_step.js')], { cwd: REPO });
  assert.match(stdout, /kernels per step, inputs x, y/);
  assert.match(stdout, /loss [\d.]+ -> [\d.]+/);
});
