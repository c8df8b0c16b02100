/**
 * The SQLite worker-scaling figures of the fleet suite alone (not a suite):
 * `npx tsx bench/_fleet-sqlite-only.ts`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundleScript } from '../test/support/bundle-script';
import { workersVsOne } from './_fleet-scaling';

const dir = mkdtempSync(join(tmpdir(), 'berth-bench-fleet-sq-'));
try {
  const script = await bundleScript(join(process.cwd(), 'bench', '_fleet-worker.ts'));
  let n = 0;
  await workersVsOne((name, value, kind) => console.log(`fleet.${name} = ${kind === 'ratio' ? `${value.toFixed(2)}x` : value.toFixed(2)}`), script, '', async () => join(mkdtempSync(join(dir, `w${++n}-`)), 'fleet.db'));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
