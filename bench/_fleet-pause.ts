/**
 * fleet.cross_engine_pause_s (issue 28): two `berth worker` processes as two hosts (two host ids) on
 * two Docker engines (the main one and a second dockerd that starts with no images), one store and
 * one registry. The run's worker on engine A is SIGKILLed while a step runs; the figure is the time
 * from A's last commit of the run to the moment that step's command started again on engine B
 * (after B took the run over and restored A's last snapshot from the registry), minus the lease
 * TTL, which any take-over waits by design.
 *
 * The step prints `/proc/uptime` first: containers share the host's kernel, so that is the host's
 * clock, read inside the sandbox the moment the command starts, and turned into wall time here.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Dockerode from 'dockerode';
import { openStore } from '../host/store';
import { bundleScript } from '../test/support/bundle-script';
import { lastJson, removeHostArtifacts } from '../test/support/plan-fixture';
import { startRegistry } from '../test/support/registry';
import { startSecondEngine } from '../test/support/second-engine';
import type { Report } from './run';

const TTL_MS = 3000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Wall-clock ms of a `/proc/uptime` reading (seconds since boot), by this machine's current offset. */
function uptimeToWallMs(uptimeS: number): number {
  const now = Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]);
  return Date.now() - (now - uptimeS) * 1000;
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 300_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await probe().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

export async function crossEnginePause(report: Report): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'berth-bench-pause-'));
  const docker = new Dockerode();
  const image = (await docker.getImage('berth/tiny:latest').inspect()).Id;
  const registry = await startRegistry();
  const engineB = await startSecondEngine('q');
  const cli = await bundleScript(join(process.cwd(), 'host', 'cli', 'main.ts'));
  const store = join(dir, 'berth.db');
  mkdirSync(join(dir, 'ws'));
  writeFileSync(join(dir, 'ws', 'README'), 'pause\n');
  writeFileSync(join(dir, 'env.yaml'), `kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${image}" }\nresources: { memoryMb: 256, commandTimeoutS: 300 }\n`);
  const steps = [
    { name: 'build', run: 'head -c 1048576 /dev/urandom > data.bin && echo built > out.txt' },
    // A is killed a second into it; B runs it again from the snapshot of `build`.
    { name: 'slow', run: 'cat /proc/uptime; sleep 6' },
  ];
  writeFileSync(join(dir, 'plan.yaml'), `name: pause\nenvironment: env.yaml\nworkspace: ws\nsteps:\n${steps.map((s) => `  - name: ${s.name}\n    run: ${JSON.stringify(s.run)}\n    replay: safe`).join('\n')}\n`);
  const hosts = { a: `bench-pause-a-${process.pid}`, b: `bench-pause-b-${process.pid}` };
  const children: ChildProcess[] = [];
  const start = (host: string, env: Record<string, string>) => {
    const child = spawn(process.execPath, [cli, 'worker', '--grace', '5', '--store', store], {
      env: { ...process.env, BERTH_HOST_ID: host, BERTH_LEASE_TTL_MS: String(TTL_MS), BERTH_REGISTRY: registry.address, BERTH_LOG_LEVEL: 'warn', ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    children.push(child);
    return { child, stderr: () => err, exited: new Promise<void>((r) => child.once('exit', () => r())) };
  };
  const reader = () => openStore(store);
  try {
    const submit = spawn(process.execPath, [cli, 'run', join(dir, 'plan.yaml'), '--detach', '--json', '--store', store], { env: { ...process.env, BERTH_HOST_ID: hosts.a }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    submit.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    await new Promise((r) => submit.once('exit', r));
    const runId = lastJson<{ run: { id: string } }>({ stdout: out, stderr: '', code: 0, signal: null } as Parameters<typeof lastJson>[0]).run.id;
    // Both workers up before the run starts, so neither start-up is inside the figure. B cannot take
    // the fresh run: its engine lacks the base image and the registry has none yet.
    const a = start(hosts.a, {});
    const b = start(hosts.b, { DOCKER_HOST: engineB.dockerHost });
    const s = await reader();
    try {
      const run = (await s.getRun(runId))!;
      await until('workers up', async () => (/worker .* on /.test(a.stderr()) && /worker .* on /.test(b.stderr()) ? true : undefined), 120_000);
      // A runs `build` (its snapshot pushed before the checkpoint commits), then starts `slow`: killed then.
      await until('step slow running on A', async () => {
        const t = (await s.listTasks({ runId })).find((x) => x.kind === 'plan-step' && (x.input as { index?: number }).index === 1);
        return t?.status === 'running' ? t : undefined;
      }, 300_000);
      const owner = (await s.getSessionOwner(run.sessionId))!;
      if (!owner.holder.startsWith('bench-pause-a')) throw new Error(`the run started on ${owner.holder}, not on A`);
      a.child.kill('SIGKILL');
      await a.exited;
      const done = await until(
        'the run to finish on B',
        async () => {
          const r = await s.getRun(runId);
          return r && ['completed', 'failed', 'needs_reconciliation', 'cancelled'].includes(r.state) ? r : undefined;
        },
        600_000,
      );
      if (done.state !== 'completed') throw new Error(`run ended ${done.state} on B: ${b.stderr().slice(-2000)}`);
      const now = (await s.getSessionOwner(run.sessionId))!;
      if (now.epoch <= owner.epoch) throw new Error('the run was not taken over');
      const lastOnA = Math.max(...(await s.listCommits(run.sessionId)).filter((c) => c.at < now.takenAt).map((c) => c.at));
      const slow = (await s.listEntries(run.sessionId, { runId })).filter((e) => e.kind === 'plan.step.output' && (e.body as { step?: string }).step === 'slow').at(-1);
      const up = /(\d+\.\d+) \d+\.\d+/.exec(JSON.stringify(slow?.body ?? {}));
      if (!up) throw new Error(`no start time in the step's output: ${JSON.stringify(slow?.body)}`);
      const startedOnB = uptimeToWallMs(Number(up[1]));
      report('cross_engine_pause_s', (startedOnB - lastOnA - TTL_MS) / 1000, 'absolute');
      report('cross_engine_takeover_s', (now.takenAt - lastOnA) / 1000, 'absolute');
    } finally {
      await s.close();
    }
  } finally {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await removeHostArtifacts(docker, hosts.a).catch(() => {});
    await engineB.stop();
    await registry.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
