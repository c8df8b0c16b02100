/**
 * WAL bytes and flush time per step, kernel vs raw (not a suite): run under
 * `strace -f -e trace=pwrite64,fsync,fdatasync -o FILE npx tsx bench/_kernel-wal.ts raw|kernel [STEPS]`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSqliteStore } from '../host/store';
import { kernelSteps } from './_kernel-steps';
import { rawStepper } from './kernel';

const which = process.argv[2] ?? 'kernel';
const steps = Number(process.argv[3] ?? 1000);
const dir = mkdtempSync(join(tmpdir(), 'berth-kwal-'));
try {
  const store = openSqliteStore(join(dir, 'k.db'));
  const t0 = performance.now();
  if (which === 'raw') {
    const step = rawStepper(store.db);
    for (let i = 1; i <= steps; i++) step(i);
    await store.close();
  } else await kernelSteps(store, steps);
  console.log(`${which} ${((performance.now() - t0) / steps).toFixed(3)} ms per step`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
