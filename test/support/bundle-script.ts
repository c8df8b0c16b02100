import { createHash } from 'node:crypto';
import { build } from 'esbuild';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync, utimesSync } from 'node:fs';
import { basename, join } from 'node:path';

/** Bundles older than this are removed from the cache (another checkout's, an edit ago). */
const KEEP_MS = 24 * 3600_000;

/** The newest change among the files a bundle can be built from: sources and test support. */
function sourcesStamp(root: string): string {
  let newest = 0;
  let count = 0;
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) walk(`${d}/${e.name}`);
      else {
        count++;
        newest = Math.max(newest, statSync(`${d}/${e.name}`).mtimeMs);
      }
    }
  };
  for (const d of ['host', 'environment', 'tools', 'test/support']) walk(join(root, d));
  newest = Math.max(newest, statSync(join(root, 'package-lock.json')).mtimeMs);
  return `${newest}:${count}`;
}

/**
 * Bundles a TypeScript entry into one ESM file under node_modules/.cache, with packages left
 * external, so crash tests can start hundreds of child processes without paying for a
 * TypeScript loader on each start. A bundle of the same sources (no file changed or added since)
 * is shared by every test file and worker: each file had built its own (~0.8 s, and a file per
 * process that was never removed: 950 MB on a developer's machine).
 */
export async function bundleScript(entry: string): Promise<string> {
  const root = process.cwd();
  const dir = join(root, 'node_modules', '.cache', 'berth-scripts');
  mkdirSync(dir, { recursive: true });
  const key = createHash('sha256').update(`${entry}\n${sourcesStamp(root)}`).digest('hex').slice(0, 16);
  const outfile = join(dir, `${basename(entry, '.ts')}-${key}.mjs`);
  if (existsSync(outfile)) {
    // In use again: never the oldest, whatever another checkout sharing this cache removes.
    utimesSync(outfile, new Date(), new Date());
    return outfile;
  }
  const now = Date.now();
  for (const f of readdirSync(dir)) {
    const at = statSync(join(dir, f), { throwIfNoEntry: false })?.mtimeMs;
    if (at !== undefined && now - at > KEEP_MS) rmSync(join(dir, f), { force: true });
  }
  // Built beside and renamed: a worker building the same bundle at once never reads half of it.
  const tmp = `${outfile}.${process.pid}.tmp.mjs`;
  await build({ entryPoints: [entry], outfile: tmp, bundle: true, platform: 'node', format: 'esm', target: 'node20', packages: 'external', logLevel: 'error' });
  renameSync(tmp, outfile);
  return outfile;
}
