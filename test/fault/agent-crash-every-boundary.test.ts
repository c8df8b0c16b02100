import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Dockerode from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { crashScript } from '../support/agent-crash-script';
import { observeAgentRun, readContainerFile, type ObservedAgentRun } from '../support/agent-observe';
import { bundleScript } from '../support/bundle-script';
import { runNode } from '../support/child';
import { requireEngine, requireTinyImage } from '../support/docker-engine';
import { startModelServer, type ModelServer } from '../support/model-server';
import { removeHostArtifacts } from '../support/plan-fixture';

/**
 * The agent run of support/agent-crash-script.ts (15 tool calls in 5 turns: write files, run a test
 * in the sandbox, fix, re-run) is SIGKILLed at every commit boundary in a fresh child process, resumed
 * by a new process, and must end like the uninterrupted run: the same entries (kinds and
 * contents), effect statuses and workspace digest, with no `never` command executed twice.
 *
 * Boundaries killed: every `before:<commit>` (the store holds everything up to the previous
 * commit and all work since it was done: an action run, its result not committed) and every
 * `after:effect.begin` (an action marked executing, not yet started). An `after:X` elsewhere
 * leaves the same store as `before:` the next commit with less work done since, and that work
 * (a model request, reading the sandbox) is repeated whenever it is lost, so it adds no case.
 */
let script: string;
let model: ModelServer;
let docker: Dockerode;
let imageId: string;
let baseline: ObservedAgentRun;
let baselineLog: Record<string, number>;
let boundaries: string[];
const dirs: string[] = [];
const hosts: string[] = [];

function newRun() {
  const dir = mkdtempSync(join(tmpdir(), 'berth-agent-crash-'));
  dirs.push(dir);
  const hostId = `agentcrash-${process.pid}-${hosts.length}`;
  hosts.push(hostId);
  return { dir, db: join(dir, 'agent.db'), hostId };
}

/** Runs the job to its end, restarting after each death; the number of starts it took. */
async function runToEnd(db: string, hostId: string, firstEnv: Record<string, string>) {
  let env = firstEnv;
  for (let start = 1; start <= 4; start++) {
    const end = await runNode(script, [db, model.url, hostId, imageId], env, 180_000);
    if (end.code === 0) return { starts: start, out: JSON.parse(end.stdout.trim().split('\n').pop()!) as { state: string } };
    if (end.signal !== 'SIGKILL') throw new Error(`agent job ended with code ${end.code} signal ${end.signal}: ${end.stderr.slice(-3000)}`);
    env = {};
  }
  throw new Error('agent job did not finish within 4 starts');
}

function execLogCounts(log: string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const line of log.split('\n').filter(Boolean)) counts[line] = (counts[line] ?? 0) + 1;
  return counts;
}

beforeAll(async () => {
  docker = await requireEngine();
  imageId = await requireTinyImage(docker);
  script = await bundleScript(join(import.meta.dirname, 'agent-job.ts'));
  model = await startModelServer(crashScript);
  const r = newRun();
  const log = join(r.dir, 'faults.log');
  const { starts } = await runToEnd(r.db, r.hostId, { BERTH_FAULT_LOG: log });
  expect(starts).toBe(1);
  boundaries = readFileSync(log, 'utf8').trim().split('\n').map((l) => l.split(' ')[1]!);
  baseline = await observeAgentRun(r.db);
  baselineLog = execLogCounts(await readContainerFile(docker, baseline.containerId!, '/tmp/exec-log'));
  await removeHostArtifacts(docker, r.hostId);
}, 180_000);

afterAll(async () => {
  await model?.close();
  for (const h of hosts) await removeHostArtifacts(docker, h).catch(() => {});
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  if (script) rmSync(script, { force: true });
});

describe('agent run killed at every commit boundary', () => {
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
    const seen = new Map<string, number>();
    const targets = boundaries
      .map((name) => {
        const nth = (seen.get(name) ?? 0) + 1;
        seen.set(name, nth);
        return { name, k: `${name}#${nth}` };
      })
      .filter((b) => b.name.startsWith('before:') || b.name.startsWith('after:effect.begin:'))
      .map((b) => b.k)
      // For debugging one boundary: BERTH_CRASH_ONLY='before:phase.complete:agent-tool#5'.
      .filter((k) => !process.env.BERTH_CRASH_ONLY || new RegExp(process.env.BERTH_CRASH_ONLY).test(k));
    const failures: string[] = [];
    const diverged: string[] = [];
    const killed = new Set<string>();
    const check = async (k: string) => {
      const r = newRun();
      const log = join(r.dir, 'kill.log');
      const { starts, out } = await runToEnd(r.db, r.hostId, { BERTH_FAULT: k, BERTH_FAULT_LOG: log });
      const lines = readFileSync(log, 'utf8').trim().split('\n');
      const last = lines.findLast((l) => l.split(' ')[1] === k.split('#')[0]);
      const hits = lines.filter((l) => l.split(' ')[1] === k.split('#')[0]).length;
      if (starts < 2 || !last || `${k.split('#')[0]}#${hits}` !== k) {
        failures.push(`${k}: boundary not reached (starts ${starts})`);
        return;
      }
      killed.add(k);
      const o = await observeAgentRun(r.db);
      const counts = o.containerId ? execLogCounts(await readContainerFile(docker, o.containerId, '/tmp/exec-log')) : {};
      await removeHostArtifacts(docker, r.hostId);
      if (o.runState !== out.state) failures.push(`${k}: child reported ${out.state}, store says ${o.runState}`);
      for (const [name, n] of Object.entries(counts)) if (n > 1) failures.push(`${k}: never command ${name} ran ${n} times`);
      const interrupted = Object.entries(o.results).filter(([, r]) => r.status === 'interrupted').map(([id]) => id);
      try {
        expect(o.users).toEqual(baseline.users);
        expect(o.models).toEqual(baseline.models);
        expect(o.workspaceDigest).toBe(baseline.workspaceDigest);
        if (interrupted.length === 0) {
          expect(o.runState).toBe(baseline.runState);
          expect(o.results).toEqual(baseline.results);
          expect(Object.fromEntries(Object.entries(o.effects).map(([c, e]) => [c, e.status]))).toEqual(Object.fromEntries(Object.entries(baseline.effects).map(([c, e]) => [c, e.status])));
          expect(counts).toEqual(baselineLog);
          return;
        }
        // A `never` command caught in flight: recorded as unknown, shown to the model as interrupted, the run held for reconciliation.
        diverged.push(k);
        expect(o.runState).toBe('needs_reconciliation');
        for (const id of interrupted) {
          expect(o.effects[id]).toMatchObject({ status: 'unknown', replay: 'never', attempts: 1 });
          expect(o.context[id]).toMatch(/^\[interrupted\] error: the host stopped while this call was running/);
        }
        const comparable = (rs: ObservedAgentRun['results']) => Object.fromEntries(Object.entries(rs).filter(([id]) => !interrupted.includes(id)));
        expect(comparable(o.results)).toEqual(comparable(baseline.results));
      } catch (err) {
        failures.push(`${k}: ${(err as Error).message.slice(0, 1500)}`);
      }
    };
    const queue = [...targets];
    const started = Date.now();
    await Promise.all(
      Array.from({ length: Number(process.env.BERTH_CRASH_PARALLEL ?? 3) }, async () => {
        for (let k = queue.shift(); k !== undefined; k = queue.shift()) await check(k);
      }),
    );
    console.log(`agent crash test: ${targets.length} of ${boundaries.length} boundaries killed in ${Math.round((Date.now() - started) / 1000)} s, ${diverged.length} caught a never command in flight`);
    expect(failures).toEqual([]);
    expect(targets.filter((t) => !killed.has(t))).toEqual([]);
    if (!process.env.BERTH_CRASH_ONLY) expect(targets.length).toBeGreaterThan(100);
    // Only kills inside one of the three `never` commands may diverge.
    expect(diverged.length).toBeLessThanOrEqual(6);
  }, 1_200_000);
});
