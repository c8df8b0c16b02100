// Whether dist/berth.cjs was built from the sources as they are now: newer than every source file.
// Read by host/cli/bin.mjs at each start (an edit is never run stale) and by `bundle.mjs --if-stale`
// (the test suite's setup rebuilds only what an edit made stale).
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The newest mtime of the files the bundle is built from (~450 stats). Paths are joined by
 * concatenation: path.join normalised every one of them again, a third of this walk's time.
 */
function newestSource(root) {
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

/** True when `root`'s dist/berth.cjs exists and no source file is newer; never throws. */
export function bundleIsFresh(root) {
  try {
    return statSync(join(root, 'dist/berth.cjs')).mtimeMs >= newestSource(root);
  } catch {
    return false;
  }
}
