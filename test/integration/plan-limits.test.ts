import { execFileSync } from 'node:child_process';
import { readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { startModelServer } from '../support/model-server';
import { planFixture } from '../support/plan-fixture';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

/** A plan fixture whose environment gets `resources` (a YAML flow mapping) instead of the default. */
async function limitedPlan(resources: string, steps: Array<{ name: string; run: string; allowFailure?: boolean }>) {
  fx = await planFixture([]);
  const envFile = `${fx.dir}/env.yaml`;
  writeFileSync(envFile, readFileSync(envFile, 'utf8').replace(/^resources: .*$/m, `resources: ${resources}`));
  const yaml = steps.map((s) => `  - name: ${s.name}\n    run: ${JSON.stringify(s.run)}\n${s.allowFailure ? '    allowFailure: true\n' : ''}`).join('');
  writeFileSync(fx.plan, `name: limits\nenvironment: env.yaml\nworkspace: ws\nsteps:\n${yaml}`);
  return fx;
}

describe('resource limits end a plan step with a typed result', { timeout: 180_000 }, () => {
  it('three files each under diskMb but together over it: disk_exceeded, no snapshot of that state, the next step does not run', async () => {
    // allowFailure does not let the run go on: the sandbox is over its limit and cannot be snapshotted.
    const fx = await limitedPlan('{ memoryMb: 256, commandTimeoutS: 120, diskMb: 40 }', [
      { name: 'fill', run: 'for i in 1 2 3; do dd if=/dev/zero of=f$i bs=1M count=20 2>/dev/null; done; ls', allowFailure: true },
      { name: 'next', run: 'echo next-ran' },
    ]);
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr).toBe(1);
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const { tasks, snapshots, entries, run } = await fx.read(async (s) => {
      const run = (await s.getRun(runId))!;
      return { run, tasks: await s.listTasks({ runId }), snapshots: await s.listSnapshots({ runId }), entries: await s.listEntries(run.sessionId) };
    });
    expect(run.state).toBe('failed');
    const steps = tasks.filter((t) => t.kind === 'plan-step');
    expect(steps).toHaveLength(1);
    expect(steps[0]!.error?.code).toBe('disk_exceeded');
    expect(snapshots.map((s) => s.checkpoint)).toEqual(['upload']);
    const out = entries.find((e) => e.kind === 'plan.step.output')!.body as { step: string; diskExceeded: boolean; snapshotId: string | null };
    expect(out).toMatchObject({ step: 'fill', diskExceeded: true, snapshotId: null });
    expect(end.stdout + end.stderr).not.toContain('next-ran');
    expect(end.stdout).toContain('disk_exceeded');
  });

  it('a run over its runBudgetS is stopped in the step that reaches it: run_budget_exceeded, even with allowFailure, and no later step runs', async () => {
    // Before: resources.runBudgetS was recorded in the run's record and enforced nowhere (a 5 s
    // budget, steps of 3 s + 3 s + 0.1 s: the run completed in 7.7 s).
    const fx = await limitedPlan('{ memoryMb: 256, commandTimeoutS: 120, runBudgetS: 3 }', [
      { name: 'first', run: 'sleep 1; echo first-ran' },
      { name: 'long', run: 'sleep 60; echo long-ended', allowFailure: true },
      { name: 'after', run: 'echo after-ran' },
    ]);
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr).toBe(1);
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const { run, steps, root } = await fx.read(async (s) => {
      const run = (await s.getRun(runId))!;
      const tasks = await s.listTasks({ runId });
      return { run, steps: tasks.filter((t) => t.kind === 'plan-step'), root: tasks.find((t) => t.id === run.rootTaskId)! };
    });
    expect(run.state).toBe('failed');
    expect(steps.map((t) => t.outcome)).toEqual(['ok', 'error']);
    expect(steps[1]!.error?.code).toBe('run_budget_exceeded');
    expect(steps[1]!.error?.message).toMatch(/^long was stopped after \d+\.\d s: it used up the run's budget of 3 s \(resources.runBudgetS/);
    // Cut at what the first step left of the 3 s, not at commandTimeoutS (120 s): its echo never ran.
    expect(steps[1]!.error?.details).toMatchObject({ step: 'long', timedOut: true });
    expect((steps[1]!.error?.details as { stdoutTail: string }).stdoutTail).not.toContain('long-ended');
    expect(root.error?.code).toBe('run_budget_exceeded');
    expect(end.stdout + end.stderr).not.toContain('after-ran');
  });

  it('an agent tool call that takes the sandbox over diskMb gets disk_exceeded and its state is not snapshotted', async () => {
    const fx = await limitedPlan('{ memoryMb: 256, commandTimeoutS: 120, diskMb: 40 }', []);
    const model = await startModelServer([
      { toolCalls: [{ name: 'exec', arguments: { command: 'for i in 1 2 3; do dd if=/dev/zero of=f$i bs=1M count=20 2>/dev/null; done' } }] },
      { content: 'done' },
    ]);
    try {
      const envFile = join(fx.dir, 'env.yaml');
      await fx.cli(['agent', 'fill it', '--env', envFile, '--workspace', join(fx.dir, 'ws'), '--model', 'scripted-1', '--base-url', model.url, '--api-key-env', 'TEST_MODEL_KEY'], { TEST_MODEL_KEY: 'sk-test' });
      const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
      const { tasks, snapshots } = await fx.read(async (s) => ({ tasks: await s.listTasks({ runId }), snapshots: await s.listSnapshots({ runId }) }));
      expect(tasks.find((t) => t.kind === 'agent-tool')?.error?.code).toBe('disk_exceeded');
      expect(snapshots.map((s) => s.checkpoint)).toEqual(['agent:start']);
    } finally {
      await model.close();
    }
  });

  it('a fork refused by the pids limit fails the step as pids_exceeded', async () => {
    const fx = await limitedPlan('{ memoryMb: 256, commandTimeoutS: 120, pids: 12 }', [{ name: 'forks', run: 'for i in $(seq 1 30); do sleep 2 & done 2>/dev/null; wait; exit 1' }]);
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr).toBe(1);
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const tasks = await fx.read((s) => s.listTasks({ runId }));
    const step = tasks.find((t) => t.kind === 'plan-step')!;
    expect(step.error?.code).toBe('pids_exceeded');
    expect((step.error?.details as { pidsLimited?: boolean } | undefined)?.pidsLimited).toBe(true);
  });

  it('resource maxima beyond the engine are refused before anything is submitted, naming the field', async () => {
    const fx = await limitedPlan('{ cpus: 4096, memoryMb: 256, commandTimeoutS: 120 }', [{ name: 'never', run: 'echo ran' }]);
    const end = await fx.cli(['run', fx.plan]);
    expect(end.code).not.toBe(0);
    expect(end.stderr).toMatch(/manifest_unsupported: .*resources\.cpus: 4096 CPUs asked, the engine has \d+/);
    expect(await fx.read((s) => s.listRuns())).toHaveLength(0);
  });
});

describe('step output cannot forge the record', { timeout: 180_000 }, () => {
  it('a step printing a line identical to a Berth audit line and an ANSI cursor-up: berth logs shows both as step output, escaped', async () => {
    const forged = '[egress] 2026-01-01T00:00:00.000Z allowed GET example.com:443 (allowed; 0 B out, 0 B in)';
    const header = '── deploy (exit 0, 0.1s)';
    const fx = await limitedPlan('{ memoryMb: 256, commandTimeoutS: 120 }', [
      { name: 'forge', run: `echo '${forged}'; echo '${header}'; printf 'up\\033[1A\\033[2Kgone\\r\\n'; printf 'bell\\007 csi\\302\\233 bidi\\342\\200\\256x\\n' >&2` },
    ]);
    const end = await fx.cli(['run', fx.plan]);
    expect(end.code, end.stderr).toBe(0);
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const logs = await fx.cli(['logs', runId]);
    expect(logs.code).toBe(0);
    for (const text of [logs.stdout, end.stderr]) {
      // No raw control character reaches the terminal (the C1 CSI and the bidi override included).
      expect(text).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/);
      expect(text).toContain('up\\x1b[1A\\x1b[2Kgone\\r');
      expect(text).toContain('bell\\x07 csi\\u009b bidi\\u202ex');
    }
    const lines = logs.stdout.split('\n');
    // Berth's own lines and step output differ by a column output cannot produce.
    expect(lines.filter((l) => l.includes(forged))).toEqual([`  out │ ${forged}`]);
    expect(lines.filter((l) => l.includes(header))).toEqual([`  out │ ${header}`]);
    expect(lines.filter((l) => l.startsWith('berth │ '))).toEqual(['berth │ step forge: exit 0, ' + lines.find((l) => l.startsWith('berth │ step forge'))!.split(', ')[1]]);
    const json = JSON.parse((await fx.cli(['logs', runId, '--json'])).stdout) as { steps: Array<{ step: string; stdoutTail: string }>; egress: unknown[] };
    expect(json.egress).toEqual([]);
    expect(json.steps[0]!.stdoutTail).toContain(forged);
  });
});

describe('uploads say what they skipped', { timeout: 180_000 }, () => {
  it('a FIFO and a socket in the workspace are named in the run record, not silently dropped', async () => {
    const fx = await limitedPlan('{ memoryMb: 256, commandTimeoutS: 120 }', [{ name: 'ls', run: 'ls' }]);
    execFileSync('mkfifo', [`${fx.dir}/ws/pipe`]);
    const server = createServer();
    await new Promise<void>((res) => server.listen(`${fx.dir}/ws/sock`, res));
    try {
      const end = await fx.cli(['run', fx.plan]);
      expect(end.code, end.stderr).toBe(0);
      expect(end.stderr).toContain('skipped 2 special files (pipe: fifo, sock: socket)');
      const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
      const entries = await fx.read(async (s) => s.listEntries((await s.getRun(runId))!.sessionId));
      const upload = entries.find((e) => e.kind === 'sandbox.upload')?.body;
      expect(upload).toMatchObject({ files: 1, skipped: [{ path: 'pipe', kind: 'fifo' }, { path: 'sock', kind: 'socket' }] });
    } finally {
      server.close();
    }
  });

  it('a workspace symlink that leaves the directory is refused before any sandbox is leased', async () => {
    const fx = await limitedPlan('{ memoryMb: 256, commandTimeoutS: 120 }', [{ name: 'ls', run: 'ls' }]);
    symlinkSync('../../etc/passwd', `${fx.dir}/ws/escape`);
    const end = await fx.cli(['run', fx.plan]);
    expect(end.code).not.toBe(0);
    expect(end.stderr).toContain('path_escape');
    expect(end.stderr).toContain('escape -> ../../etc/passwd');
    expect(await fx.read((s) => s.listRuns())).toHaveLength(0);
    expect(await fx.docker.listContainers({ all: true, filters: { label: [`berth.host=${fx.hostId}`] } })).toHaveLength(0);
  });
});
