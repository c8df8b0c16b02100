import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { invariantGuard } from '../support/invariant-check';
import { openSqliteStore, openStore } from '../../host/store';
import type { Json, Task } from '../../host/model';
import { bundleScript } from '../support/bundle-script';
import { runNode } from '../support/child';
import { startEffectService } from '../support/effect-service';
import { sampleBoundaries, sampleKinds } from '../support/crash-sample';
import { STORE_KINDS, sharedPostgres, stopSharedPostgres, type StoreKind } from '../support/store-kinds';

/** The run as the crash test compares it: everything that must not depend on where the host died. */
interface Observed {
  runState: string;
  tree: Node;
  summaryOps: Json[];
  effects: Record<string, { status: string; replay: string; calls: number }>;
}
interface Node {
  kind: string;
  status: string;
  outcome: string | null;
  result: Json;
  error: string | null;
  children: Node[];
}

let script: string;
let service: Awaited<ReturnType<typeof startEffectService>>;
const dirs: string[] = [];

function newDir() {
  const d = mkdtempSync(join(tmpdir(), 'berth-crash-'));
  dirs.push(d);
  return d;
}

/** Where one job's store lives: a SQLite file in a new temp dir, or a new PostgreSQL database. */
async function newLocation(kind: StoreKind): Promise<string> {
  return kind === 'postgres' ? (await sharedPostgres()).createStoreDatabase('crash') : join(newDir(), 'job.db');
}

async function observe(db: string): Promise<Observed> {
  const store = await openStore(db);
  try {
    const [run] = await store.listRuns();
    const tasks = await store.listTasks({ runId: run!.id });
    const node = (t: Task): Node => ({
      kind: t.kind,
      status: t.status,
      outcome: t.outcome,
      result: t.result,
      error: t.error?.code ?? null,
      children: tasks.filter((c) => c.parentId === t.id).map(node),
    });
    const counts = service.counts();
    const effects: Observed['effects'] = {};
    for (const e of await store.listEffects({ runId: run!.id })) {
      effects[(e.intent as { label: string }).label] = { status: e.status, replay: e.replay, calls: counts[e.id] ?? 0 };
    }
    const doc = await store.getDocument('summary');
    return {
      runState: run!.state,
      tree: node(tasks.find((t) => t.id === run!.rootTaskId)!),
      summaryOps: [doc!.baseline, ...doc!.ops.map((o) => o.op)],
      effects,
    };
  } finally {
    await store.close();
  }
}

/** Runs the job to its end, restarting after each death, and returns how many starts it took. */
async function runToEnd(db: string, firstEnv: Record<string, string>) {
  let env = firstEnv;
  for (let start = 1; start <= 6; start++) {
    const end = await runNode(script, [db, service.url], env);
    if (end.code === 0) return { starts: start, out: JSON.parse(end.stdout.trim().split('\n').pop()!) as { state: string } };
    if (end.signal !== 'SIGKILL') throw new Error(`job ended with code ${end.code} signal ${end.signal}: ${end.stderr}`);
    env = {};
  }
  throw new Error('job did not finish within 6 starts');
}

/** Subtrees holding an interrupted task may differ from the uninterrupted run; everything else may not. */
function withoutInterrupted(n: Node): Node | 'interrupted' {
  if (n.outcome === 'interrupted') return 'interrupted';
  const children = n.children.map(withoutInterrupted);
  if (children.includes('interrupted')) return 'interrupted';
  return { ...n, children: children as Node[] };
}

const baselines = new Map<StoreKind, Observed>();
/** Uninterrupted runs per store before the kills: the boundaries aimed at are those every one of them reached. */
const BASELINE_RUNS = 2;

function countBy(names: string[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const n of names) m.set(n, (m.get(n) ?? 0) + 1);
  return m;
}

beforeAll(async () => {
  script = await bundleScript(join(import.meta.dirname, 'scripted-job.ts'));
  service = await startEffectService();
}, 120_000);

afterAll(async () => {
  // Each step timed: a loaded machine once took longer than the hook's minute here (issue 24).
  const t0 = Date.now();
  await service?.close();
  const t1 = Date.now();
  await stopSharedPostgres();
  const t2 = Date.now();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  if (script) rmSync(script, { force: true });
  console.log(`crash test cleanup: service ${t1 - t0} ms, PostgreSQL stop ${t2 - t1} ms, temp dirs ${Date.now() - t2} ms`);
}, 300_000);

/** A killed run's PostgreSQL database, once observed: the cluster would otherwise hold one per kill (gigabytes to remove at the end). */
async function dropDatabase(kind: StoreKind, db: string): Promise<void> {
  if (kind !== 'postgres') return;
  await (await sharedPostgres()).sql(`DROP DATABASE ${new URL(db).pathname.slice(1)} WITH (FORCE)`);
}

describe.each(STORE_KINDS)('crash at every commit boundary (%s store)', (kind) => {
let baseline: Observed;
let boundaries: string[];
/** Boundary kinds (commit labels) whose count differed between the uninterrupted runs. */
let varying: Array<{ name: string; counts: number[] }>;

// The job makes the same commits in every run (test/fault/scripted-job.ts): two uninterrupted runs
// must agree on how often each boundary is hit. Kills aim only at occurrences both runs reached, and
// a kind one of them never reached fails the suite by name (it could not be aimed at reliably).
beforeAll(async () => {
  const runs: string[][] = [];
  for (let i = 0; i < BASELINE_RUNS; i++) {
    const log = join(newDir(), 'faults.log');
    const db = await newLocation(kind);
    const { starts } = await runToEnd(db, { BERTH_FAULT_LOG: log });
    expect(starts).toBe(1);
    runs.push(readFileSync(log, 'utf8').trim().split('\n').map((l) => l.split(' ')[1]!));
    if (i === 0) baseline = await observe(db);
    else expect(await observe(db)).toEqual(baseline);
  }
  const counts = runs.map((r) => countBy(r));
  const names = [...new Set(runs.flat())];
  varying = names.map((name) => ({ name, counts: counts.map((c) => c.get(name) ?? 0) })).filter((v) => new Set(v.counts).size > 1);
  if (varying.length) console.log(`crash test (${kind}): boundary counts differed between uninterrupted runs: ${JSON.stringify(varying)}`);
  // The first run's order, keeping of each name only the occurrences every run reached.
  const least = new Map(names.map((n) => [n, Math.min(...counts.map((c) => c.get(n) ?? 0))]));
  const kept = new Map<string, number>();
  boundaries = runs[0]!.filter((n) => {
    kept.set(n, (kept.get(n) ?? 0) + 1);
    return kept.get(n)! <= least.get(n)!;
  });
  baselines.set(kind, baseline);
}, 240_000);

  it('makes the same commits in every uninterrupted run, so every boundary kind can be aimed at', () => {
    expect(varying.filter((v) => Math.min(...v.counts) === 0)).toEqual([]);
  });

  it('runs the uninterrupted job to completion with both replay policies and every join kind', () => {
    expect(baseline.runState).toBe('completed');
    expect(baseline.tree.outcome).toBe('ok');
    expect(Object.values(baseline.effects).map((e) => e.replay).sort()).toEqual(['never', 'never', 'never', 'safe', 'safe', 'safe']);
    expect(baseline.effects['fast-fails']?.status).toBe('failed');
    expect(boundaries.length).toBeGreaterThan(50);
    // Same job, same outcome on either store (the SQLite run is the reference).
    const reference = baselines.get('sqlite');
    if (kind !== 'sqlite' && reference) {
      expect(baseline.tree).toEqual(reference.tree);
      expect(baseline.summaryOps).toEqual(reference.summaryOps);
      expect(Object.fromEntries(Object.entries(baseline.effects).map(([l, e]) => [l, [e.status, e.calls]]))).toEqual(
        Object.fromEntries(Object.entries(reference.effects).map(([l, e]) => [l, [e.status, e.calls]])),
      );
    }
  });

  it('ends every run killed at a commit boundary like the uninterrupted one and never sends a `never` action twice', async () => {
    const killed = new Set<string>();
    const diverged: string[] = [];
    const failures: string[] = [];
    // Boundary k of the uninterrupted run is the nth hit of its name; aiming by name and count
    // hits exactly that boundary even when concurrent tasks commit in another order.
    const seenCount = new Map<string, number>();
    const all = boundaries.map((name) => {
      const nth = (seenCount.get(name) ?? 0) + 1;
      seenCount.set(name, nth);
      return `${name}#${nth}`;
    });
    // PostgreSQL also dies inside each kind of transaction, after its first writes: the server must
    // roll the whole commit back when the connection drops with the process.
    if (kind === 'postgres') {
      const labels = new Set(boundaries.filter((b) => b.startsWith('before:')).map((b) => b.slice('before:'.length)));
      all.push(...[...labels].map((l) => `mid:${l}#1`));
    }
    // SQLite: a seeded half of the kinds of boundary (before:, after: of each label), each once at a
    // seeded occurrence; the other half in another run's sample. PostgreSQL: a seeded half of the
    // mid: kinds (the server must roll a dropped commit back: only this store has them) and a seeded
    // twelfth of the before:/after: boundaries. CI time: the suite keeps both cores busy, so every
    // kill counts: every kind took 185 s on SQLite in a quiet full run (54 kills), every mid: kind
    // and a sixth 237 s on PostgreSQL. BERTH_CRASH_ALL=1 takes every one, BERTH_CRASH_SEED replays a sample.
    const kindOf = (t: string) => t.slice(0, t.lastIndexOf('#'));
    const targets =
      kind === 'postgres'
        ? [...sampleBoundaries(all.filter((t) => t.startsWith('mid:')), 1 / 2, `crash test (${kind}, mid:)`), ...sampleBoundaries(all.filter((t) => !t.startsWith('mid:')), 1 / 12, `crash test (${kind}, before:/after:)`)].sort((a, b) => all.indexOf(a) - all.indexOf(b))
        : sampleKinds(all, 1 / 2, kindOf, `crash test (${kind})`);
    if (kind === 'sqlite') expect(new Set(targets.map(kindOf)).size).toBe(targets.length);
    else expect(targets.filter((t) => t.startsWith('mid:')).length).toBeGreaterThanOrEqual(new Set(all.filter((t) => t.startsWith('mid:'))).size / 2);
    const check = async (k: string) => {
      const db = await newLocation(kind);
      try {
        await checkAt(k, db);
      } finally {
        await dropDatabase(kind, db);
      }
    };
    const checkAt = async (k: string, db: string) => {
      const log = join(newDir(), 'kill.log');
      const { starts, out } = await runToEnd(db, { BERTH_FAULT: k, BERTH_FAULT_LOG: log });
      const lines = readFileSync(log, 'utf8').trim().split('\n');
      const last = lines[lines.length - 1]!.split(' ');
      const hitsOfName = lines.filter((l) => l.split(' ')[1] === last[1]).length;
      if (starts < 2 || `${last[1]}#${hitsOfName}` !== k) {
        // Not reached although both uninterrupted runs reached it: this run's commits differed (its log says how).
        failures.push(`${k}: boundary not reached (starts ${starts}, last hit ${last.join(' ')}, ${lines.filter((l) => l.split(' ')[1] === kindOf(k)).length} hits of its kind)`);
        return;
      }
      killed.add(k);
      const seen = await observe(db);
      // Every run killed at every boundary and resumed keeps the run invariants (issue 17).
      const broken = await invariantGuard().check(db);
      if (broken) failures.push(`${k}: ${broken.message}`);
      if (seen.runState !== out.state) failures.push(`${k}: child reported ${out.state}, store says ${seen.runState}`);
      for (const [label, e] of Object.entries(seen.effects)) {
        if (e.replay === 'never' && e.calls > 1) failures.push(`${k}: never action ${label} sent ${e.calls} times`);
      }
      const unknown = Object.entries(seen.effects).filter(([, e]) => e.status === 'unknown');
      if (unknown.length === 0) {
        try {
          expect(seen.tree).toEqual(baseline.tree);
          expect(seen.summaryOps).toEqual(baseline.summaryOps);
          expect(seen.runState).toBe(baseline.runState);
          expect(Object.fromEntries(Object.entries(seen.effects).map(([l, e]) => [l, e.status]))).toEqual(
            Object.fromEntries(Object.entries(baseline.effects).map(([l, e]) => [l, e.status])),
          );
        } catch (err) {
          failures.push(`${k}: ${(err as Error).message.slice(0, 2000)}`);
        }
        return;
      }
      // A `never` action caught in flight: recorded as unknown, its task interrupted, the run held for reconciliation.
      diverged.push(k);
      try {
        expect(unknown.every(([, e]) => e.replay === 'never' && e.calls <= 1)).toBe(true);
        expect(seen.runState).toBe('needs_reconciliation');
        expect(withoutInterrupted(seen.tree)).toEqual(withoutInterrupted(baseline.tree) === 'interrupted' ? 'interrupted' : expect.anything());
        const strip = (n: Node) => n.children.map(withoutInterrupted).filter((c) => c !== 'interrupted');
        for (const c of strip(seen.tree)) expect(strip(baseline.tree)).toContainEqual(c);
      } catch (err) {
        failures.push(`${k} diverged wrongly: ${(err as Error).message.slice(0, 2000)}`);
      }
    };
    const ks = [...targets];
    const workers = Array.from({ length: 3 }, async () => {
      for (let k = ks.shift(); k !== undefined; k = ks.shift()) await check(k);
    });
    await Promise.all(workers);
    expect(failures).toEqual([]);
    expect(targets.filter((t) => !killed.has(t))).toEqual([]);
    // A kill diverges only when some `never` action (of any concurrent task) was in flight; most kills must match exactly.
    expect(diverged.length).toBeLessThan(targets.length / 2);
    console.log(`crash test (${kind}): ${targets.length} boundaries killed, ${diverged.length} caught a never action in flight`);
  }, 1_800_000);
});
