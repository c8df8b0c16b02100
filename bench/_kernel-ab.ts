/**
 * A/B of the kernel's cost per step against another checkout of Berth, interleaved in one process
 * (load shifts both sides alike): `npx tsx bench/_kernel-ab.ts /path/to/base [rounds] [steps]`.
 * Each round runs one single run of `steps` transitions and 20 concurrent runs of steps/20 each,
 * base then this tree (order alternating), and the raw transaction loop; prints wall and CPU
 * (process.cpuUsage: every thread, the flush's included) per step, then the medians.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { rawStepper } from './kernel';

type Steps = typeof import('./_kernel-steps');
type StoreMod = typeof import('../host/store');

const base = resolve(process.argv[2] ?? '');
const rounds = Number(process.argv[3] ?? 6);
const steps = Number(process.argv[4] ?? 2000);

async function side(root: string): Promise<{ steps: Steps; store: StoreMod }> {
  return { steps: (await import(join(root, 'bench', '_kernel-steps.ts'))) as Steps, store: (await import(join(root, 'host', 'store', 'index.ts'))) as StoreMod };
}

const cpu = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

async function measure(body: (dir: string) => Promise<unknown>): Promise<{ wallUs: number; cpuUs: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'berth-kab-'));
  try {
    const c0 = cpu();
    const t0 = performance.now();
    await body(dir);
    return { wallUs: ((performance.now() - t0) * 1000) / steps, cpuUs: (cpu() - c0) / steps };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function raw(store: StoreMod, dir: string): void {
  const s = store.openSqliteStore(join(dir, 'raw.db'));
  const step = rawStepper(s.db);
  for (let i = 1; i <= steps; i++) step(i);
  s.db.close();
}

const sides = { base: await side(base), new: await side(resolve('.')) };
const rows: Record<string, Array<{ wallUs: number; cpuUs: number }>> = {};
const add = (k: string, v: { wallUs: number; cpuUs: number }) => (rows[k] ??= []).push(v);
for (let r = 0; r < rounds; r++) {
  const order = r % 2 === 0 ? (['base', 'new'] as const) : (['new', 'base'] as const);
  add('raw', await measure(async (dir) => raw(sides.new.store, dir)));
  for (const name of order) {
    const s = sides[name];
    add(`${name} 1 run`, await measure((dir) => s.steps.kernelSteps(s.store.openSqliteStore(join(dir, 'k.db')), steps)));
    add(`${name} 20 runs`, await measure((dir) => s.steps.concurrentKernelSteps(s.store.openSqliteStore(join(dir, 'c.db')), 20, steps / 20)));
  }
  console.log(`round ${r + 1} load ${loadavg().map((l) => l.toFixed(1)).join(' ')}: ` + Object.entries(rows).map(([k, v]) => `${k} ${v.at(-1)!.wallUs.toFixed(0)}/${v.at(-1)!.cpuUs.toFixed(0)}`).join(', '));
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log('medians, us per step (wall / cpu):');
for (const [k, v] of Object.entries(rows)) console.log(`  ${k.padEnd(12)} wall ${median(v.map((x) => x.wallUs)).toFixed(0).padStart(6)}  cpu ${median(v.map((x) => x.cpuUs)).toFixed(0).padStart(5)}  (best wall ${Math.min(...v.map((x) => x.wallUs)).toFixed(0)}, best cpu ${Math.min(...v.map((x) => x.cpuUs)).toFixed(0)})`);
