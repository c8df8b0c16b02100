import { spawn, type ChildProcess } from 'node:child_process';
import { basename, dirname, isAbsolute } from 'node:path';
import type { Run } from '../../host/model';
import { unlessPaused } from '../../host/sandbox/paused-wait';
import { bundledCli, lastJson, type planFixture } from './plan-fixture';

type Fixture = Awaited<ReturnType<typeof planFixture>>;

/** A `berth worker` child process of the fixture's store (same machine, same host id, its own pid). */
export interface WorkerProcess {
  child: ChildProcess;
  pid: number;
  stderr(): string;
  exited: Promise<number | null>;
}

/** Starts `berth worker` on the fixture's store with a short ownership lease. */
export function startWorker(fx: Fixture, leaseTtlMs: number, args: string[] = []): Promise<WorkerProcess> {
  return startCli(fx, ['worker', '--grace', '5', ...args], { BERTH_LEASE_TTL_MS: String(leaseTtlMs) });
}

/** Starts any `berth` command on the fixture's store as a child process left running (a host to SIGKILL or SIGSTOP). */
export async function startCli(fx: Fixture, args: string[], env: Record<string, string> = {}): Promise<WorkerProcess> {
  const script = await bundledCli();
  const child = spawn(process.execPath, [script, ...args, '--store', fx.store], {
    env: { ...process.env, BERTH_HOST_ID: fx.hostId, BERTH_OPERATOR: 'tester', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  child.stdout!.resume();
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, pid: child.pid!, stderr: () => err, exited };
}

/** Ends a worker: SIGTERM (drain) and wait; SIGKILL after `ms` if it does not drain. */
export async function stopWorker(w: WorkerProcess, ms = 60_000): Promise<number | null | 'killed'> {
  if (w.child.exitCode !== null || w.child.signalCode !== null) return w.child.exitCode;
  w.child.kill('SIGTERM');
  const end = await Promise.race([w.exited, new Promise<'slow'>((r) => setTimeout(() => r('slow'), ms))]);
  if (end !== 'slow') return end;
  w.child.kill('SIGKILL');
  await w.exited;
  return 'killed';
}

/** How many of the session's containers run a process whose command line holds `pattern` (a step's command: its shell and its child count once). */
export async function processesOf(f: Fixture, sessionId: string, pattern: string): Promise<number> {
  let n = 0;
  for (const c of await f.docker.listContainers({ filters: { label: [`berth.session=${sessionId}`] } })) {
    const top = await f.docker.getContainer(c.Id).top({ ps_args: '-eo pid,args' }).catch(() => ({ Processes: [] as string[][] }));
    if ((top.Processes ?? []).some((p: string[]) => p.join(' ').includes(pattern))) n += 1;
  }
  return n;
}

/** Stops every child process a test left (thawing a SIGSTOPped one first: a failed test must not leave it frozen), each within `ms`. */
export async function stopChildren(children: readonly WorkerProcess[], ms: number): Promise<void> {
  for (const c of children) {
    c.child.kill('SIGCONT');
    await stopWorker(c, ms);
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls until `probe` returns a value (not undefined), or fails after `ms` naming `what`. */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, ms = 240_000, every = 200): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = await probe().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(every);
  }
}

/** The run's step task with plan index `index` once it is executing (status running, its command started). */
export function stepRunning(fx: Fixture, runId: string, index: number) {
  return fx.read(async (s) => {
    const t = (await s.listTasks({ runId })).find((x) => x.kind === 'plan-step' && (x.input as { index?: number }).index === index);
    return t?.status === 'running' ? t : undefined;
  });
}

/** Submits the fixture's plan with --detach and returns the run. */
export async function submitDetached(fx: Fixture): Promise<Run> {
  const end = await fx.cli(['run', fx.plan, '--detach', '--json']);
  if (end.code !== 0) throw new Error(`--detach failed (${end.code}): ${end.stderr}`);
  return lastJson<{ run: Run }>(end).run;
}

const FINAL: Run['state'][] = ['completed', 'failed', 'cancelled', 'compensated', 'needs_reconciliation'];

/** Waits for the run to settle. */
export function runSettled(fx: Fixture, runId: string, ms?: number): Promise<Run> {
  return waitFor(`run ${runId} to settle`, () => fx.read(async (s) => {
    const r = await s.getRun(runId);
    return r && FINAL.includes(r.state) ? r : undefined;
  }), ms);
}

/** How often each step of the run produced a finished result (a step run twice shows as 2). */
export function finishedStepCounts(fx: Fixture, runId: string): Promise<Record<string, number>> {
  return fx.read(async (s) => {
    const run = (await s.getRun(runId))!;
    const counts: Record<string, number> = {};
    for (const e of await s.listEntries(run.sessionId, { runId })) {
      if (e.kind !== 'plan.step.output') continue;
      const step = (e.body as { step: string }).step;
      counts[step] = (counts[step] ?? 0) + 1;
    }
    return counts;
  });
}

/** The workspace digest of the run's newest snapshot. */
export function runDigest(fx: Fixture, runId: string): Promise<string | undefined> {
  return fx.read(async (s) => (await s.listSnapshots({ runId })).at(-1)?.workspaceDigest);
}

/**
 * Lets a step waiting for `release` in its workspace (`while [ ! -e release ]; do sleep 0.2; done`)
 * go on, in every running container of the session (but those in `except`; `file` another path to
 * touch, e.g. an absolute one outside the workspace that a resume's digest check does not see,
 * created by the engine as root): tests hold a step open this way until what
 * they race against has happened, instead of hoping a sleep is long enough on a loaded machine.
 */
export async function releaseStep(fx: Fixture, sessionId: string, file = 'release', except: string[] = []): Promise<void> {
  for (const c of await fx.docker.listContainers({ filters: { label: [`berth.session=${sessionId}`] } })) {
    if (except.includes(c.Id)) continue;
    if (isAbsolute(file)) {
      // Copied in by the engine, no process in the sandbox: an exec racing a snapshot's pause had
      // its `runc init` frozen inside the container's cgroup, and the engine hung on that container
      // (docker inspect, unpause and remove all waited) until the cgroup was thawed by hand.
      await fx.docker.getContainer(c.Id).putArchive(emptyFileTar(basename(file)), { path: dirname(file) });
      continue;
    }
    // As the command user: root holds no capabilities in a sandbox, so it cannot write the user's workspace.
    const container = fx.docker.getContainer(c.Id);
    const stream = await unlessPaused(container, async () => (await container.exec({ Cmd: ['touch', file], User: 'berth', AttachStdout: true, AttachStderr: true })).start({}));
    await new Promise<void>((resolve, reject) => stream.on('data', () => {}).on('end', resolve).on('error', reject));
  }
}

/** A tar of one empty file named `name` (ustar: one header block, then two zero blocks). */
function emptyFileTar(name: string): Buffer {
  const header = Buffer.alloc(512);
  header.write(name, 0, 100, 'utf8');
  header.write('0000644\0', 100, 'ascii');
  header.write('0000000\0', 108, 'ascii');
  header.write('0000000\0', 116, 'ascii');
  header.write('00000000000\0', 124, 'ascii');
  header.write(`${Math.floor(Date.now() / 1000).toString(8).padStart(11, '0')}\0`, 136, 'ascii');
  header.write('        ', 148, 'ascii');
  header.write('0', 156, 'ascii');
  header.write('ustar\0' + '00', 257, 'ascii');
  let sum = 0;
  for (const b of header) sum += b;
  header.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'ascii');
  return Buffer.concat([header, Buffer.alloc(1024)]);
}

/**
 * {@link releaseStep} again and again until `until` settles: a step that is re-run on a restored
 * sandbox (a safe step caught in flight by a take-over goes back to its snapshot) waits anew.
 */
export async function keepReleasing(fx: Fixture, sessionId: string, until: Promise<unknown>, file = 'release', except: string[] = []): Promise<void> {
  let done = false;
  void until.finally(() => (done = true));
  while (!done) {
    await releaseStep(fx, sessionId, file, except).catch(() => {});
    await Promise.race([until.catch(() => {}), sleep(500)]);
  }
}

/**
 * SIGSTOPs `child`, again and again until it is frozen outside a write transaction of the SQLite
 * store at `storePath`: a process frozen inside one holds the file's write lock, and no other
 * process can write the store (claim, commit) until it runs again. That is a limit of a file store,
 * not what a take-over test tests (one-owner's frozen worker runs on PostgreSQL for this reason),
 * and a freeze landing there made fleet-takeover wait 240 s for a claim that could not happen (full
 * suite, load ~10). Checked by taking the write lock here
 * (BEGIN IMMEDIATE, waiting up to 2 s for a live writer) and letting it go at once.
 */
export async function freezeOutsideWrite(child: ChildProcess, storePath: string): Promise<void> {
  const { default: Database } = await import('better-sqlite3');
  for (let attempt = 0; ; attempt++) {
    child.kill('SIGSTOP');
    const db = new Database(storePath, { timeout: 2000 });
    try {
      db.exec('BEGIN IMMEDIATE');
      db.exec('ROLLBACK');
      return;
    } catch (err) {
      if ((err as { code?: string }).code !== 'SQLITE_BUSY' || attempt >= 20) throw err;
    } finally {
      db.close();
    }
    child.kill('SIGCONT');
    await sleep(150);
  }
}
