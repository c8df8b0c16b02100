#!/usr/bin/env -S node --no-concurrent-recompilation
// V8 optimises hot functions on this process's main thread, not on helper threads: each helper's
// compile of a large function took 7-10 MB of malloc'd memory that glibc kept in that thread's
// arena afterwards (one arena per thread that ever compiled), ~9 MB of a 3,000-step run's peak
// RSS that a 100-step run did not have (bench/RESULTS.md, session 20). A flag V8 reads only as
// it starts (the helper threads exist by the time this file runs), so it is given here, where
// the `berth` command starts node; `node host/cli/bin.mjs` runs without it.
//
// The `berth` command. It runs dist/berth.cjs (the sources bundled by `npm run build`, which
// `npm ci` runs as `prepare`, with V8's code cache: code-cache.mjs) while no source file is newer than it, else the
// sources themselves through tsx (~1.9 s: every file is transpiled at each start). An edit is
// therefore never run stale. BERTH_NO_BUNDLE=1 always takes the sources.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleIsFresh } from './bundle-fresh.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const bundle = join(root, 'dist/berth.cjs');
// No bundle (not built yet) or a stale one: the sources.
const fresh = !process.env.BERTH_NO_BUNDLE && bundleIsFresh(root);
if (process.argv.includes('--debug')) process.setSourceMapsEnabled(true);
// The young generation stays at its starting size (2 MB) in every command instead of growing to
// 32 MB under a burst of allocation: loading a 3,000-step plan grew it to 32 MB in the run's first
// seconds, the largest part of that run's peak RSS; `berth export` streams a run page by page.
// Set before the bundle loads (whose own allocations would grow it first) and here, after node's
// start: on node's command line V8 raises this flag to its minimum of 2 (no effect), while a value
// set at run time is read as it is each time V8 would grow the young generation. A worker thread's
// start applies the minimum again (tsx's loader runs in one), so it is set again once each is up
// (bench/RESULTS.md, long sessions 10 and 12). Short commands start no slower (measured there).
const { setFlagsFromString } = await import('node:v8');
const youngAtStartingSize = () => setFlagsFromString('--semi-space-growth-factor=1');
youngAtStartingSize();
process.on('worker', (worker) => worker.once('online', youngAtStartingSize));
if (fresh) {
  // Set now, as host/support/heap-bound.ts sets it later in a run: V8 keys a code cache by its
  // flags, and a cache made at the exit of a run (with this flag) was rejected at every next start
  // (without it). It exposes nothing here: only contexts created later get `gc`.
  setFlagsFromString('--expose-gc');
  const { runCached } = await import('./code-cache.mjs');
  runCached(bundle, process.argv.slice(2).find((a) => !a.startsWith('-')));
} else {
  const { register } = await import('tsx/esm/api');
  register();
  // The loader's thread has started (register() waits for it): the flag, reset by that start, again.
  youngAtStartingSize();
  await import('./main.ts');
}
