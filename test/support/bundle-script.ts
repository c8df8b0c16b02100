import { build } from 'esbuild';
import { mkdirSync } from 'node:fs';
import { basename, join } from 'node:path';

/**
 * Bundles a TypeScript entry into one ESM file under node_modules/.cache, with packages left
 * external, so crash tests can start hundreds of child processes without paying for a
 * TypeScript loader on each start.
 */
export async function bundleScript(entry: string): Promise<string> {
  const dir = join(process.cwd(), 'node_modules', '.cache', 'berth-scripts');
  mkdirSync(dir, { recursive: true });
  const outfile = join(dir, `${basename(entry, '.ts')}-${process.pid}.mjs`);
  await build({ entryPoints: [entry], outfile, bundle: true, platform: 'node', format: 'esm', target: 'node20', packages: 'external', logLevel: 'error' });
  return outfile;
}
