import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Dockerode from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { invariantGuard } from '../support/invariant-check';
import { crashScript } from '../support/agent-crash-script';
import { observeAgentRun, readContainerFile, type ObservedAgentRun } from '../support/agent-observe';
import { bundleScript } from '../support/bundle-script';
import { runNode } from '../support/child';
import { requireEngine, requireTinyImage } from '../support/docker-engine';
import { startModelServer, type ModelServer } from '../support/model-server';
import { removeHostArtifacts } from '../support/plan-fixture';
import { markDone, readCommitKeys } from '../support/commit-keys';
import { openStore } from '../../host/store';
import { sampleBoundaries } from '../support/crash-sample';
import { STORE_KINDS, sharedPostgres, stopSharedPostgres, type StoreKind } from '../support/store-kinds';

/**
 * The agent run of support/agent-crash-script.ts (15 tool calls in 5 turns: write files, run a
 * test in the sandbox, fix, re-run) is SIGKILLed by the store's fault points (BERTH_FAULT) at
 * every commit boundary, resumed by new processes, and must end like the uninterrupted run: the
 * same entries (kinds and contents), effect statuses and workspace digest, with no `never`
 * command executed twice and every interrupted call shown to the model.
 *
 * Boundaries killed: every `before:<commit>` (the store holds everything up to the previous
 * commit and all work since it was done: an action run, its result not committed) and every
 * `after:effect.begin` (an action marked executing, not yet started). An `after:X` elsewhere
 * leaves the same store as `before:` the next commit with less work done since, and that work
 * (a model request, reading the sandbox) is repeated whenever it is lost, so it adds no case.
 *
 * To stay within minutes on two cores, one run is killed at several boundaries in turn (each
 * resumed process is killed again further on): boundaries where no `never` command is in flight
 * share runs that must end exactly like the uninterrupted one; those where one is (and the run
 * must end as needs_reconciliation) share runs among themselves. Which boundary each kill hit is
 * read from the commit keys (support/commit-keys.ts), so coverage is checked boundary by boundary.
 */
let script: string;
let model: ModelServer;
let docker: Dockerode;
let imageId: string;
let baseline: ObservedAgentRun;
let baselineLog: Record<string, number>;
let targets: Target[];
let commitCount: number;
const dirs: string[] = [];
const hosts: string[] = [];

/** One boundary of the uninterrupted run to kill at. */
interface Target {
  id: string;
  type: 'before' | 'after';
  key: string;
  label: string;
  /** Position of its commit in the uninterrupted run. */
  index: number;
  /** Which hit of its fault point name it is in the uninterrupted run. */
  nth: number;
  /** A `never` command is in flight here: a kill makes the run end differently, by design. */
  diverging: boolean;
}

const MAX_KILLS_PER_RUN = 12;
const MIN_COMMITS_BETWEEN_KILLS = 4;

/** Tool call ids of the script's non-safe execs. */
const NEVER_CALLS = new Set(crashScript.flatMap((t, turn) => (t.toolCalls ?? []).flatMap((c, i) => (c.name === 'exec' && typeof c.arguments === 'object' && !c.arguments.safe ? [`call_${turn}_${i}`] : []))));

/** A run's own dir and host id, and its store: a SQLite file there, or a fresh PostgreSQL database. */
async function newRun(kind: StoreKind) {
  const dir = mkdtempSync(join(tmpdir(), 'berth-agent-crash-'));
  dirs.push(dir);
  const hostId = `agentcrash-${process.pid}-${hosts.length}`;
  hosts.push(hostId);
  const db = kind === 'postgres' ? await (await sharedPostgres()).createStoreDatabase('agent') : join(dir, 'agent.db');
  return { dir, db, keys: join(dir, 'keys.log'), hostId };
}

const start = (db: string, hostId: string, env: Record<string, string>) => runNode(script, [db, model.url, hostId, imageId], env, 180_000);

function execLogCounts(log: string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const line of log.split('\n').filter(Boolean)) counts[line] = (counts[line] ?? 0) + 1;
  return counts;
}

/** Pairs each fault point hit with the commit it belongs to (the B line written just before it). */
function boundariesOf(faultLog: string, keysFile: string): Array<{ name: string; key: string }> {
  const keys = readCommitKeys(keysFile).filter((l) => l.kind === 'B').map((l) => l.key);
  let i = -1;
  return readFileSync(faultLog, 'utf8').trim().split('\n').map((l) => {
    const name = l.split(' ')[1]!;
    if (name.startsWith('before:')) i += 1;
    return { name, key: keys[i]! };
  });
}

async function labelCounts(db: string): Promise<Map<string, number>> {
  const store = await openStore(db);
  try {
    const [run] = await store.listRuns();
    const counts = new Map<string, number>();
    for (const c of run ? await store.listCommits(run.sessionId) : []) counts.set(c.label, (counts.get(c.label) ?? 0) + 1);
    return counts;
  } finally {
    await store.close();
  }
}

beforeAll(async () => {
  docker = await requireEngine();
  imageId = await requireTinyImage(docker);
  script = await bundleScript(join(import.meta.dirname, 'agent-job.ts'));
  model = await startModelServer(crashScript);
}, 180_000);

afterAll(async () => {
  await model?.close();
  for (const h of hosts) await removeHostArtifacts(docker, h).catch(() => {});
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  if (script) rmSync(script, { force: true });
  await stopSharedPostgres();
}, 60_000);

// Each store kind gets its own uninterrupted baseline (the module-level state above is reset by
// the block's beforeAll, which runs right before that block's tests).
describe.each(STORE_KINDS)('agent run killed at every commit boundary (%s store)', (kind) => {
beforeAll(async () => {
  const r = await newRun(kind);
  const log = join(r.dir, 'faults.log');
  const end = await start(r.db, r.hostId, { BERTH_FAULT_LOG: log, BERTH_COMMIT_KEYS: r.keys });
  expect(end.code).toBe(0);
  const hits = boundariesOf(log, r.keys);
  const seen = new Map<string, number>();
  const commitIndex = new Map<string, number>();
  let inFlight: string | null = null;
  targets = [];
  for (const h of hits) {
    const nth = (seen.get(h.name) ?? 0) + 1;
    seen.set(h.name, nth);
    if (!commitIndex.has(h.key)) commitIndex.set(h.key, commitIndex.size);
    const [type, ...rest] = h.name.split(':');
    const label = rest.join(':');
    const task = h.key.split('|')[1]!;
    const neverTool = task.startsWith('tool:') && NEVER_CALLS.has(task.slice(5));
    if (type === 'before' && neverTool && inFlight === task && (label.startsWith('phase.complete') || label.startsWith('phase.interrupt'))) {
      targets.push({ id: `before|${h.key}`, type: 'before', key: h.key, label, index: commitIndex.get(h.key)!, nth, diverging: true });
      inFlight = null;
      continue;
    }
    if (type === 'before' || label.startsWith('effect.begin')) {
      targets.push({ id: `${type}|${h.key}`, type: type as 'before' | 'after', key: h.key, label, index: commitIndex.get(h.key)!, nth, diverging: inFlight !== null || (type === 'after' && neverTool) });
    }
    if (type === 'after' && label.startsWith('effect.begin') && neverTool) inFlight = task;
  }
  commitCount = commitIndex.size;
  baseline = await observeAgentRun(r.db);
  baselineLog = execLogCounts(await readContainerFile(docker, baseline.containerId!, '/tmp/exec-log'));
  await removeHostArtifacts(docker, r.hostId);
}, 180_000);

  it('runs the uninterrupted job to completion: 15 tool calls, the test failing, then fixed and passing', () => {
    expect(baseline.runState).toBe('completed');
    expect(Object.keys(baseline.results)).toHaveLength(15);
    expect(baseline.results.call_1_0?.content).toContain('FAIL: expected 5, got -1');
    expect(baseline.results.call_2_0?.content).toBe('edited add.sh: replaced 1 occurrence');
    expect(baseline.results.call_2_2?.status).toBe('invalid');
    expect(baseline.results.call_2_3?.status).toBe('invalid');
    expect(baseline.results.call_3_0?.content).toContain('ok: 2+3=5');
    expect(baseline.results.call_4_0?.content).toContain('all good');
    expect(baselineLog).toEqual({ t1: 1, t3: 1, t4: 1 });
    expect(baseline.models.at(-1)?.content).toBe('add.sh is fixed and the test passes.');
    expect(baseline.workspaceDigest).toMatch(/^sha256:/);
  });

  it('ends every killed and resumed run like the uninterrupted one, never runs a `never` command twice, and shows interrupted calls to the model', async () => {
    const only = process.env.BERTH_CRASH_ONLY ? new RegExp(process.env.BERTH_CRASH_ONLY) : null;
    // A seeded fifth of the boundaries on SQLite, a sixth on PostgreSQL (CI time: a third on each took
    // 120 and 263 s quiet, on a machine whose two cores the suite keeps busy)
    // (BERTH_CRASH_ALL=1 takes every one, BERTH_CRASH_SEED replays a sample). Not less on
    // PostgreSQL: with a quarter (seed 1594550892) only 7 chains ran and one diverging chain took
    // the exact comparisons below half (11 of 23).
    const wanted = sampleBoundaries(targets.filter((t) => !only || only.test(t.id)), only ? 1 : kind === 'postgres' ? 1 / 6 : 1 / 5, `agent crash test (${kind})`);
    const claimed = new Set<string>();
    const covered = new Set<string>();
    const failures: string[] = [];
    let runs = 0;
    let diverged = 0;
    // Kills of chains that started at a boundary where no `never` command was in flight in the
    // baseline, and how many of those ended in a run compared exactly.
    let plannedKills = 0;
    let exactKills = 0;
    /** The earliest free target after `after`; `diverging` set: only targets of that kind. */
    // On PostgreSQL the order of a run's commits shifts with timing more than on SQLite (async
    // reads interleave the tasks), so the nth hit of a label may be another commit than in the
    // baseline and a target can miss again and again. Each target is tried at most this many
    // times there; a kill that landed elsewhere was still a real boundary, killed and checked.
    const maxTries = kind === 'postgres' ? 3 : Infinity;
    const tries = new Map<string, number>();
    const claim = (after: number, diverging?: boolean) => {
      const t = wanted.find((x) => !claimed.has(x.id) && !covered.has(x.id) && (tries.get(x.id) ?? 0) < maxTries && x.index > after && (diverging === undefined || x.diverging === diverging));
      if (t) (claimed.add(t.id), tries.set(t.id, (tries.get(t.id) ?? 0) + 1));
      return t;
    };

    /**
     * One run: killed at `first`, then at further boundaries of the same kind (a run that can
     * diverge only at diverging ones, in later `never` commands), then run to its end and compared.
     */
    const chain = async (first: Target) => {
      runs += 1;
      const r = await newRun(kind);
      let target: Target | undefined = first;
      const kills: string[] = [];
      for (let n = 1; n <= MAX_KILLS_PER_RUN + 2; n++) {
        const faultLog = join(r.dir, `faults-${n}.log`);
        const env: Record<string, string> = { BERTH_COMMIT_KEYS: r.keys, BERTH_FAULT_LOG: faultLog };
        if (target) {
          // Hits of this fault point still to come: the uninterrupted run's count minus the commits already made.
          const done = n === 1 ? 0 : ((await labelCounts(r.db)).get(target.label) ?? 0);
          env.BERTH_FAULT = `${target.type}:${target.label}#${target.nth - done}`;
        }
        const end = await start(r.db, r.hostId, env);
        if (end.code === 0) {
          if (target) claimed.delete(target.id);
          break;
        }
        if (end.signal !== 'SIGKILL') {
          failures.push(`${first.id}: process ${n} ended with code ${end.code}: ${end.stderr.slice(-1500)}`);
          return;
        }
        const lastHit = readFileSync(faultLog, 'utf8').trim().split('\n').at(-1)!.split(' ')[1]!;
        const lastKey = readCommitKeys(r.keys).filter((l) => l.kind === 'B').at(-1)!.key;
        const type = lastHit.startsWith('before:') ? 'before' : 'after';
        if (type === 'after') markDone(r.keys, lastKey);
        const hit = `${type}|${lastKey}`;
        kills.push(hit);
        covered.add(hit);
        // A recovery detour (a re-begun effect, a retried request) adds commits of some label, so a
        // count aimed past it lands early. Such a run goes on to its end without further kills;
        // the missed boundary goes back to the pool for a fresh process, where counts are exact.
        const offTarget: boolean = target !== undefined && hit !== target.id;
        if (offTarget) claimed.delete(target!.id);
        const at: number = targets.find((t) => t.id === hit)?.index ?? target?.index ?? commitCount;
        target = offTarget || kills.length >= MAX_KILLS_PER_RUN ? undefined : claim(at + MIN_COMMITS_BETWEEN_KILLS - 1, first.diverging);
      }
      const o = await observeAgentRun(r.db);
      // Every killed and resumed run keeps the run invariants (issue 17).
      const broken = await invariantGuard().check(r.db);
      if (broken) failures.push(`run killed at ${kills.join(', ')}: ${broken.message}`);
      const counts = o.containerId ? execLogCounts(await readContainerFile(docker, o.containerId, '/tmp/exec-log')) : {};
      await removeHostArtifacts(docker, r.hostId);
      const where = `run killed at ${kills.join(', ')}`;
      if (!first.diverging) plannedKills += kills.length;
      for (const [name, c] of Object.entries(counts)) if (c > 1) failures.push(`${where}: never command ${name} ran ${c} times`);
      const interrupted = Object.entries(o.results).filter(([, x]) => x.status === 'interrupted').map(([id]) => id);
      try {
        expect(o.users).toEqual(baseline.users);
        expect(o.models).toEqual(baseline.models);
        expect(o.workspaceDigest).toBe(baseline.workspaceDigest);
        if (interrupted.length === 0) {
          expect(o.runState).toBe(baseline.runState);
          expect(o.results).toEqual(baseline.results);
          expect(Object.fromEntries(Object.entries(o.effects).map(([c, e]) => [c, e.status]))).toEqual(Object.fromEntries(Object.entries(baseline.effects).map(([c, e]) => [c, e.status])));
          expect(counts).toEqual(baselineLog);
          if (!first.diverging) exactKills += kills.length;
          return;
        }
        // A `never` command caught in flight: recorded as unknown, shown to the model as interrupted, the run held for reconciliation.
        diverged += 1;
        expect(o.runState).toBe('needs_reconciliation');
        for (const id of interrupted) {
          expect(NEVER_CALLS.has(id)).toBe(true);
          expect(o.effects[id]).toMatchObject({ status: 'unknown', replay: 'never', attempts: 1 });
          expect(o.context[id]).toMatch(/^\[interrupted\] error: the host stopped while this call was running/);
        }
        const comparable = (rs: ObservedAgentRun['results']) => Object.fromEntries(Object.entries(rs).filter(([id]) => !interrupted.includes(id)));
        expect(comparable(o.results)).toEqual(comparable(baseline.results));
      } catch (err) {
        failures.push(`${where}: ${(err as Error).message.slice(0, 1500)}`);
      }
    };

    const started = Date.now();
    await Promise.all(
      Array.from({ length: Number(process.env.BERTH_CRASH_PARALLEL ?? 3) }, async () => {
        for (let t = claim(-1); t !== undefined; t = claim(-1)) await chain(t);
      }),
    );
    const missedAll = wanted.filter((t) => !covered.has(t.id)).map((t) => t.id);
    const unreachable = missedAll.filter((id) => (tries.get(id) ?? 0) >= maxTries);
    const missed = missedAll.filter((id) => !unreachable.includes(id));
    if (unreachable.length) console.log(`agent crash test (${kind}): ${unreachable.length} sampled boundaries never hit exactly in ${maxTries} tries (timing-shifted): ${unreachable.join(', ')}`);
    console.log(`agent crash test (${kind}): ${wanted.filter((w) => covered.has(w.id)).length} of ${wanted.length} sampled boundaries killed (${covered.size} in all) (${commitCount} commits) in ${runs} runs, ${Math.round((Date.now() - started) / 1000)} s; ${diverged} runs caught a never command in flight; ${exactKills} of ${plannedKills} kills of chains meant to compare exactly did`);
    expect(failures).toEqual([]);
    expect(missed).toEqual([]);
    expect(unreachable.length).toBeLessThan(wanted.length / 2);
    // The job's every boundary was enumerated: 83 commits, 96 boundaries (98 commits before each
    // tool call's end carried its parent's wake, host/kernel/parent-wake.ts).
    if (!only) expect(targets.length).toBeGreaterThan(90);
    // Only kills while a `never` command is in flight may diverge (each checked above). A chain
    // started at a boundary where the baseline had none in flight claims only such boundaries, so
    // most of its runs must compare exactly: otherwise the exact comparison above went vacuous.
    // Which commits have a command in flight shifts with timing (calls of one turn run side by
    // side), and one chain carries up to 12 kills: a share is timing luck (more than half failed
    // once on PostgreSQL in a full run, 6 of 17 exact). What the comparison needs is that it ran:
    // at least one kill compared exactly; the share is printed above.
    expect(plannedKills).toBeGreaterThan(0);
    expect(exactKills).toBeGreaterThan(0);
  }, 1_200_000);
});
