// Globals the package's code reads that a browser lacks, injected by esbuild into the browser
// bundle (scripts/build-browser.mjs): Buffer from the `buffer` package, and a `process` with an
// empty environment whose exit hooks do nothing (a page has no process to leave).
export { Buffer } from 'buffer';
export const process = {
  env: {},
  on() {},
  emitWarning(message) { console.warn(message); },
};
