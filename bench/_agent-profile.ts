/**
 * agent profile (not a suite): where one writing tool call's time goes, from the commit that
 * creates its task to the commit of its result, against a raw exec of the same command.
 * `npx tsx bench/_agent-profile.ts`
 */
import Dockerode from 'dockerode';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { continueSession, submitAgentRun } from '../host/agent';
import { createHostRuntime } from '../host/runtime/host-runtime';
import { createSandboxHost, Lease, snapshotEngine } from '../host/sandbox';
import { Snapshotter } from '../host/snapshot/snapshotter';
import { openSqliteStore } from '../host/store';
import { systemClock } from '../host/support';
import { newId } from '../host/support/ids';
import { tinyEnvironment } from '../test/support/agent-environment';
import { startModelServer } from '../test/support/model-server';
import { requireEngine, requireTinyImage } from '../test/support/docker-engine';
import { median } from './_stats';

const CALLS = 8;
const docker = await requireEngine();
const imageId = await requireTinyImage(docker);
const dir = mkdtempSync(join(tmpdir(), 'berth-bench-aprof-'));
const store = openSqliteStore(join(dir, 'bench.db'));
const hostId = newId('benchagent');
const logger = pino({ level: 'warn' });
const sandbox = createSandboxHost({ docker, records: store, clock: systemClock, logger, hostId });
const rt = createHostRuntime({ store, sandbox, engine: snapshotEngine(docker), clock: systemClock, logger, hostId });
let command = 'mkdir -p src && for i in $(seq 1 300); do echo $i > src/f$i; done';
const model = await startModelServer((turn) => (turn % (CALLS + 1) === CALLS ? { content: 'done' } : { toolCalls: [{ name: 'exec', arguments: { command } }] }));
process.env.BERTH_BENCH_MODEL_KEY = 'sk-bench';
const deps = { ...rt, toolNames: [...rt.agent.tools.keys()] };
const settings = { model: { baseUrl: model.url, model: 'bench', apiKeyEnv: 'BERTH_BENCH_MODEL_KEY' } };

// One timeline of named spans; a tool call's window is cut out of it afterwards.
type Span = { name: string; t0: number; t1: number };
const spans: Span[] = [];
let recording = false;
function wrap(obj: object, name: string, label: (args: unknown[]) => string) {
  const o = obj as Record<string, (...a: unknown[]) => unknown>;
  const orig = o[name]!;
  o[name] = function (this: unknown, ...a: unknown[]) {
    const t0 = performance.now();
    const r = orig.apply(this, a);
    const done = () => recording && spans.push({ name: label(a), t0, t1: performance.now() });
    if (r instanceof Promise) return r.finally(done);
    done();
    return r;
  };
}
wrap(store, 'commit', (a) => `commit ${(a[0] as { label: string }).label}`);
for (const m of ['recordCost', 'appendOutput', 'getEffect', 'getTask', 'readDocument', 'listTasks', 'listEffects', 'getRun', 'listEntries']) if (m in store) wrap(store, m, () => `store.${m}`);
wrap(Lease.prototype, 'exec', () => 'lease.exec');
wrap(rt.agent.plan, 'digest', () => 'workspace digest');
// Finer: the engine calls of an exec and the digest's parts (nested inside the spans above).
const C = (Dockerode as unknown as { Container: { prototype: object } }).Container.prototype;
const E = (Dockerode as unknown as { Exec: { prototype: object } }).Exec.prototype;
wrap(C, 'exec', () => '  engine exec create');
wrap(C, 'inspect', () => '  engine container inspect');
wrap(E, 'start', () => '  engine exec start (to hijack)');
wrap(E, 'inspect', () => '  engine exec inspect');
wrap(Snapshotter.prototype, 'scanLayer', () => '  digest: layer scan');
wrap(Snapshotter.prototype, 'layer', () => '  digest: layer dirs');
for (const m of ['getWorkspaceManifest', 'getDocument']) wrap(store, m, () => `store.${m}`);
const windows: Array<{ t0: number; t1: number }> = [];
const created = new Map<string, number>();
rt.kernel.onCommit((e) => {
  const now = performance.now();
  if (e.label === 'phase.spawn:agent-generate') for (const id of e.taskIds.slice(1)) created.set(id, now);
  if (e.label === 'phase.complete:agent-tool') {
    const t0 = created.get(e.taskIds[0]!);
    if (t0 !== undefined) windows.push({ t0, t1: now });
  }
});
const raw: number[] = [];
try {
  await rt.kernel.start();
  let sessionId: string | null = null;
  const block = async () => {
    const { run } = sessionId ? await continueSession(deps, { sessionId, message: 'again' }) : await submitAgentRun(deps, { message: 'go', settings, environment: tinyEnvironment(imageId) });
    sessionId = run.sessionId;
    const done = await rt.kernel.waitForRun(run.id);
    if (done.state !== 'completed') throw new Error(`run ended ${done.state}`);
  };
  await block();
  command = 'date +%N > out.txt';
  await block();
  recording = true;
  windows.length = 0;
  let cpuCalls = 0, cpuRaw = 0;
  for (let b = 0; b < 3; b++) {
    const c0 = process.cpuUsage();
    await block();
    const c1 = process.cpuUsage(c0);
    cpuCalls += (c1.user + c1.system) / 1000;
    const container = docker.getContainer(rt.agent.plan.held(sessionId!)!.containerId);
    for (let i = 0; i < CALLS; i++) {
      const t0 = performance.now();
      const ex = await container.exec({ Cmd: ['sh', '-c', command], User: '1000:1000', WorkingDir: '/workspace', AttachStdout: true, AttachStderr: true, Tty: false });
      const s = (await ex.start({ hijack: true, stdin: false })) as NodeJS.ReadableStream;
      await new Promise<void>((res) => { s.on('data', () => undefined); s.on('end', res); s.on('close', res); });
      await ex.inspect();
      raw.push(performance.now() - t0);
    }
    const c2 = process.cpuUsage(c0);
    cpuRaw += (c2.user + c2.system) / 1000 - (c1.user + c1.system) / 1000;
  }
  console.log(`host CPU: ${(cpuCalls / (3 * (CALLS + 1))).toFixed(2)} ms per model turn + tool call (incl. the model server), raw exec ${(cpuRaw / (3 * CALLS)).toFixed(2)} ms`);
  // Per call: each span's time inside the window, summed by name; and the time no span covers.
  const per: Record<string, number[]> = {};
  const total: number[] = [];
  const uncovered: number[] = [];
  for (const w of windows) {
    const inside = spans.filter((s) => s.t1 > w.t0 && s.t0 < w.t1);
    const sums: Record<string, number> = {};
    for (const s of inside) sums[s.name] = (sums[s.name] ?? 0) + Math.min(s.t1, w.t1) - Math.max(s.t0, w.t0);
    for (const [k, v] of Object.entries(sums)) (per[k] ??= []).push(v);
    total.push(w.t1 - w.t0);
    // covered = union of spans
    const iv = inside.map((s) => [Math.max(s.t0, w.t0), Math.min(s.t1, w.t1)] as [number, number]).sort((a, b) => a[0] - b[0]);
    let cov = 0, end = w.t0;
    for (const [a, b] of iv) { if (b > end) { cov += b - Math.max(a, end); end = b; } }
    uncovered.push(w.t1 - w.t0 - cov);
  }
  console.log(`writing tool call p50 ${median(total).toFixed(1)} ms, raw exec p50 ${median(raw).toFixed(1)} ms, ratio ${(median(total) / median(raw)).toFixed(2)} (n=${total.length})`);
  for (const [k, v] of Object.entries(per).sort()) console.log(`  ${k.padEnd(40)} ${median(v.concat(Array(total.length - v.length).fill(0))).toFixed(2)} ms  (in ${v.length} of ${total.length})`);
  console.log(`  ${'(no span: scheduling, phase code)'.padEnd(40)} ${median(uncovered).toFixed(2)} ms`);
  if (process.env.TIMELINE) {
    const w = windows[windows.length - 2]!;
    console.log(`timeline of one call (${(w.t1 - w.t0).toFixed(1)} ms):`);
    for (const sp of spans.filter((x) => x.t1 > w.t0 && x.t0 < w.t1).sort((a, b) => a.t0 - b.t0)) console.log(`  +${(sp.t0 - w.t0).toFixed(1).padStart(6)} ${(sp.t1 - sp.t0).toFixed(1).padStart(6)}  ${sp.name}`);
  }
} finally {
  await rt.kernel.stop();
  await sandbox.close();
  await model.close();
  const left = await docker.listContainers({ all: true, filters: { label: [`berth.host=${hostId}`] } });
  await Promise.all(left.map((c) => docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}
