/**
 * Kernel steps alone, for a CPU profile (not a suite):
 * `node --cpu-prof --cpu-prof-dir DIR --import tsx bench/_kernel-prof.ts [STEPS]`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSqliteStore } from '../host/store';
import { kernelSteps } from './_kernel-steps';

const steps = Number(process.argv[2] ?? 4000);
const dir = mkdtempSync(join(tmpdir(), 'berth-kprof-'));
try {
  await kernelSteps(openSqliteStore(join(dir, 'warm.db')), 500);
  const r = await kernelSteps(openSqliteStore(join(dir, 'k.db')), steps);
  const sorted = [...r.commitMs].sort((a, b) => a - b);
  console.log(`steps/s ${r.perSecond.toFixed(0)}  commit p50 ${sorted[sorted.length >> 1]!.toFixed(3)} ms  per step ${(1000 / r.perSecond).toFixed(3)} ms`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
