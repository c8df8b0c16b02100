#!/usr/bin/env node
// The `berth` command. It runs dist/berth.mjs (the sources bundled by `npm run build`, which
// `npm ci` runs as `prepare`: it starts in ~0.6 s) while no source file is newer than it, else the
// sources themselves through tsx (~1.9 s: every file is transpiled at each start). An edit is
// therefore never run stale. BERTH_NO_BUNDLE=1 always takes the sources.
import { readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const bundle = join(root, 'dist/berth.mjs');

/**
 * The newest mtime of the files the bundle is built from (~450 stats). Paths are joined by
 * concatenation: path.join normalised every one of them again, a third of this walk's time.
 */
function newestSource() {
  let newest = statSync(join(root, 'package-lock.json')).mtimeMs;
  const walk = (dir) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (e.isDirectory()) walk(`${dir}/${e.name}`);
      else if (e.name.endsWith('.ts')) {
        const m = statSync(`${dir}/${e.name}`).mtimeMs;
        if (m > newest) newest = m;
      }
    }
  };
  for (const d of ['host', 'environment', 'tools']) walk(join(root, d));
  return newest;
}

let fresh = false;
try {
  fresh = !process.env.BERTH_NO_BUNDLE && statSync(bundle).mtimeMs >= newestSource();
} catch {
  // No bundle (not built yet): the sources.
}
if (process.argv.includes('--debug')) process.setSourceMapsEnabled(true);
// `berth export` streams a run of any length page by page: its young generation stays at its
// starting size rather than growing to 32 MB under that allocation rate (set before the bundle
// loads, whose own allocations would grow it first; bench/RESULTS.md, long session 10).
if (process.argv[2] === 'export') (await import('node:v8')).setFlagsFromString('--semi-space-growth-factor=1');
if (fresh) {
  await import(bundle);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('./main.ts');
}
