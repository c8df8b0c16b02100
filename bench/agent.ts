/**
 * agent: one durable tool call against a raw dockerode exec of the same command, measured in
 * blocks that alternate in one run on the same container (medians):
 *
 * - tool_call_vs_raw_exec: an `exec` tool call of `true` marked safe (read-only, so no workspace
 *   digest follows), from the commit that creates its task to the commit of its result: effect
 *   begin commit, the exec, result + receipt commit (since session 11 the creating commit holds
 *   the call's intent and the task begins in `execute`: before, a task start and an intent
 *   commit (`call`) came first);
 * - mutating_tool_call_vs_raw_exec: the same call not marked safe (replay never), which adds the
 *   workspace digest measurement resume verification needs (docker diff + a scan exec);
 * - writing_tool_call_vs_raw_exec: a call not marked safe that writes one file into a workspace of
 *   300 files (`date +%N > out.txt`), so its digest must look at a change (a listing exec in the
 *   sandbox before session 4 of #14, the overlay layer read on the host since), against a raw exec
 *   of the same command;
 * - raw exec: exec create + start + drain + inspect of the same `sh -c <command>` as the workspace owner,
 *   8 of them right after each block of 8 calls; each ratio is the median over the blocks of
 *   (the block's median call / its raw execs' median).
 */
import Dockerode from 'dockerode';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { continueSession, submitAgentRun } from '../host/agent';
import { createHostRuntime } from '../host/runtime/host-runtime';
import { createSandboxHost, snapshotEngine } from '../host/sandbox';
import { openSqliteStore } from '../host/store';
import { systemClock } from '../host/support';
import { newId } from '../host/support/ids';
import { tinyEnvironment } from '../test/support/agent-environment';
import { startModelServer } from '../test/support/model-server';
import type { Report } from './run';
import { requireEngine, requireTinyImage } from '../test/support/docker-engine';
import { median } from './_stats';

const CALLS_PER_BLOCK = 8;
const BLOCKS = 4;

export default async function agentBench(report: Report): Promise<void> {
  const docker = await requireEngine();
  const imageId = await requireTinyImage(docker);
  const dir = mkdtempSync(join(tmpdir(), 'berth-bench-agent-'));
  const store = openSqliteStore(join(dir, 'bench.db'));
  const hostId = newId('benchagent');
  const logger = pino({ level: 'warn' });
  const sandbox = createSandboxHost({ docker, records: store, clock: systemClock, logger, hostId });
  const rt = createHostRuntime({ store, sandbox, engine: snapshotEngine(docker), clock: systemClock, logger, hostId });
  let safe = true;
  let command = 'true';
  const model = await startModelServer((turn) => (turn % (CALLS_PER_BLOCK + 1) === CALLS_PER_BLOCK ? { content: 'done' } : { toolCalls: [{ name: 'exec', arguments: { command, ...(safe ? { safe: true } : {}) } }] }));
  process.env.BERTH_BENCH_MODEL_KEY = 'sk-bench';
  const deps = { ...rt, toolNames: [...rt.agent.tools.keys()] };
  const settings = { model: { baseUrl: model.url, model: 'bench', apiKeyEnv: 'BERTH_BENCH_MODEL_KEY' } };

  // Per tool task: when the commit that created it landed, and when its result committed.
  const created = new Map<string, number>();
  const durations: number[] = [];
  const toIntent: number[] = [];
  rt.kernel.onCommit((e) => {
    const now = performance.now();
    if (e.label === 'phase.spawn:agent-generate') for (const id of e.taskIds.slice(1)) created.set(id, now);
    // The intent's own commit (`call`) only for a call spawned at `call` (approval, plan); else the creating commit held it.
    if (e.label === 'phase.next:agent-tool') {
      const t0 = created.get(e.taskIds[0]!);
      if (t0 !== undefined) toIntent.push(now - t0);
    }
    if (e.label === 'phase.complete:agent-tool') {
      const t0 = created.get(e.taskIds[0]!);
      if (t0 !== undefined) durations.push(now - t0);
    }
  });
  try {
    await rt.kernel.start();
    let sessionId: string | null = null;
    const block = async () => {
      const { run } = sessionId
        ? await continueSession(deps, { sessionId, message: 'again' })
        : await submitAgentRun(deps, { message: 'run true', settings, environment: tinyEnvironment(imageId) });
      sessionId = run.sessionId;
      const done = await rt.kernel.waitForRun(run.id);
      if (done.state !== 'completed') throw new Error(`bench run ended ${done.state}`);
    };
    const rawExec = async (container: Dockerode.Container) => {
      const t0 = performance.now();
      const ex = await container.exec({ Cmd: ['sh', '-c', command], User: '1000:1000', WorkingDir: '/workspace', AttachStdout: true, AttachStderr: true, Tty: false });
      const s = (await ex.start({ hijack: true, stdin: false })) as NodeJS.ReadableStream;
      await new Promise<void>((res) => {
        s.on('data', () => undefined);
        s.on('end', res);
        s.on('close', res);
      });
      if ((await ex.inspect()).ExitCode !== 0) throw new Error('raw exec failed');
      return performance.now() - t0;
    };
    // `ratio` is the median over blocks of (block's median call / the raw execs right after it):
    // each block and its raw execs see the same load, which swings several-fold between blocks here.
    const measure = async () => {
      const ours: number[] = [];
      const raw: number[] = [];
      const ratios: number[] = [];
      for (let b = 0; b < BLOCKS; b++) {
        durations.length = 0;
        await block();
        ours.push(...durations);
        const container = docker.getContainer(rt.agent.plan.held(sessionId!)!.containerId);
        const blockRaw: number[] = [];
        for (let i = 0; i < CALLS_PER_BLOCK; i++) blockRaw.push(await rawExec(container));
        raw.push(...blockRaw);
        ratios.push(median(durations) / median(blockRaw));
      }
      return { ours: median(ours), raw: median(raw), ratio: median(ratios) };
    };
    // Warm-up: lease, first exec, event subscription and first digest out of the figures.
    await block();
    const read = await measure();
    report('tool_call_vs_raw_exec', read.ratio, 'ratio');
    report('tool_call_ms', read.ours, 'absolute');
    report('raw_exec_ms', read.raw, 'absolute');
    // Where the rest goes: scheduling the new task and its first two commits (start, intent) ...
    report('tool_call_until_intent_ms', toIntent.length ? median(toIntent) : 0, 'absolute');
    // ... and what one durable (fsynced) commit costs here; a call makes four.
    const commits: number[] = [];
    for (let i = 0; i < 30; i++) {
      const t0 = performance.now();
      await store.commit({ sessionId: 'bench-commit', label: 'bench', createSession: {}, entries: [{ id: newId('ent'), kind: 'bench', body: { i } }] });
      commits.push(performance.now() - t0);
    }
    report('commit_p50_ms', median(commits), 'absolute');
    safe = false;
    const write = await measure();
    report('mutating_tool_call_vs_raw_exec', write.ratio, 'ratio');
    report('mutating_tool_call_ms', write.ours, 'absolute');
    // A call that changes the workspace (300 files, one rewritten per call).
    command = 'mkdir -p src && for i in $(seq 1 300); do echo $i > src/f$i; done';
    await measure();
    command = 'date +%N > out.txt';
    const writing = await measure();
    report('writing_tool_call_vs_raw_exec', writing.ratio, 'ratio');
    report('writing_tool_call_ratio_of_medians', writing.ours / writing.raw, 'ratio');
    report('writing_tool_call_ms', writing.ours, 'absolute');
  } finally {
    await rt.kernel.stop();
    await sandbox.close();
    await model.close();
    const left = await docker.listContainers({ all: true, filters: { label: [`berth.host=${hostId}`] } });
    await Promise.all(left.map((c) => docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
