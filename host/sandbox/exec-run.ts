import type Dockerode from 'dockerode';
import { posix } from 'node:path';
import type { Logger } from 'pino';
import { BerthError, type ErrorIds } from '../errors';
import { CappedOutput } from './capped-output';
import type { DiskGuard } from './disk-guard';
import { FrameDemuxer } from './docker-frames';
import { engineError } from './engine-errors';
import type { EngineEvents } from './engine-events';
import type { ExecActivity } from './exec-activity';
import { WRAPPER_NAME, WRAPPER_SCRIPT, type ControlReport } from './exec-scripts';
import type { ExecOptions, ExecResult } from './exec-types';
import { settleOutcome, waitForExit, wrapperStartBound } from './exec-outcome';
import { CancelledWhilePaused, isPausedRefusal, unlessPaused } from './paused-wait';
import { whyNotRunning } from './container-gone';
import { enterExecSetup } from './exec-gate';
import { killTree } from './process-tree-kill';
import { runControl, runScript } from './sandbox-control';
import { ADOPT_SCRIPT } from './exec-scripts';
import { WrapperLine } from './wrapper-line';
import { startUsageMeter } from './exec-usage';
import { cgroupOomKills, onThisKernel } from './cgroup-counters';

/** What one exec needs from its lease. */
export interface ExecHost {
  container: Dockerode.Container;
  containerId: string;
  events: EngineEvents;
  disk: DiskGuard;
  logger: Logger;
  ids: ErrorIds;
  workspace: string;
  owner: string;
  defaultTimeoutMs: number;
  outputCapBytes: number;
  /** Cumulative cgroup counters last seen; an exec that sees them grow hit the limit. */
  counters: { pidsMax: number; oomKill: number };
  /** The commands running on the lease (see exec-activity.ts). */
  activity: ExecActivity;
  /** Registers a running exec so a disk-limit hit can kill it; returns the unregister function. */
  track(run: RunningExec): () => void;
}

export type KillReason = 'timeout' | 'cancel' | 'disk';

/** A running exec as its lease sees it. */
export interface RunningExec {
  /** `performance.now()` before the exec was created: nothing it wrote can be older. */
  readonly startedAt: number;
  /**
   * The layer's size when it started, when that was over the limit (0 otherwise): a command that
   * starts in a full layer (an `rm` after a killed writer) is killed only if it grows it further.
   */
  readonly diskAtStart: number;
  kill(reason: KillReason): void;
}


const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

function envList(env: Record<string, string> = {}): string[] {
  return Object.entries(env).map(([k, v]) => {
    if (!ENV_NAME.test(k) || v.includes('\0')) throw new BerthError('invalid_argument', `invalid environment variable name or value: "${k}"`);
    return `${k}=${v}`;
  });
}

export function toArgv(cmd: string | string[]): string[] {
  const argv = typeof cmd === 'string' ? ['/bin/sh', '-c', cmd] : cmd;
  if (argv.length === 0 || argv[0] === '') throw new BerthError('invalid_argument', 'exec needs a command');
  return argv;
}

/** A tag is read back from the exec's process config after a crash: short printable ASCII. */
const TAG = /^[\x20-\x7e]{1,200}$/;

/**
 * Runs one command in the sandbox. The command is wrapped so that its process tree can be killed
 * as a whole (see exec-scripts.ts); output is demultiplexed, streamed live and kept capped; the
 * outcome, including limit hits, comes back as a value.
 */
export async function runExec(host: ExecHost, cmd: string | string[], opts: ExecOptions = {}): Promise<ExecResult> {
  const started = performance.now();
  const startedWall = Date.now();
  const argv = toArgv(cmd);
  const user = opts.user ?? host.owner;
  const cap = opts.outputCapBytes ?? host.outputCapBytes;
  const stdout = new CappedOutput(cap);
  const stderr = new CappedOutput(cap);
  const result = (over: Partial<ExecResult>): ExecResult => ({
    exitCode: -1,
    timedOut: false,
    cancelled: false,
    oomKilled: false,
    pidsLimited: false,
    diskExceeded: false,
    sandboxLost: false,
    durationMs: performance.now() - started,
    stdout: stdout.text(),
    stderr: stderr.text(),
    stdoutBytes: stdout.totalBytes,
    stderrBytes: stderr.totalBytes,
    truncated: stdout.truncated || stderr.truncated,
    ...over,
  });
  if (opts.signal?.aborted) return result({ cancelled: true, notStarted: true });

  if (opts.tag !== undefined && !TAG.test(opts.tag)) throw new BerthError('invalid_argument', 'an exec tag is 1-200 printable ASCII characters');

  // Measured afresh only when the last measurement was over the limit (rare: a writer was just killed).
  const diskAtStart = host.disk.exceeded ? await host.disk.measure(started).catch(() => host.disk.lastMeasuredBytes) : 0;
  const token = host.activity.start();
  const forget = host.activity.takeAcknowledged();
  let startedExec = false;
  let leaveSetup: () => void = () => undefined;
  let meter: Awaited<ReturnType<typeof startUsageMeter>> | undefined;
  try {
    await host.events.ensureConnected();
    const oomBefore = host.events.oomCount(host.containerId);
    const oomKillsBefore = await cgroupOomKills(host.container);
    meter = opts.measure ? await startUsageMeter(host.container, host.logger) : undefined;
    const hasStdin = opts.stdin !== undefined;
    // No pause of this process may freeze the container while the exec's process is set up (see
    // exec-gate.ts); the setup ends when the wrapper speaks or the exec ends.
    leaveSetup = await enterExecSetup(host.containerId);
    // A paused sandbox (another process's snapshot commit) is waited for, not taken for a dead one.
    const begun = await unlessPaused(
      host.container,
      async () => {
        let exec: Dockerode.Exec;
        try {
          exec = await host.container.exec({
            Cmd: ['/bin/sh', '-c', WRAPPER_SCRIPT, WRAPPER_NAME, opts.keepProcesses ? '1' : '0', opts.tag ?? '', ...argv],
            User: user,
            WorkingDir: opts.cwd === undefined ? host.workspace : posix.resolve(host.workspace, opts.cwd),
            Env: envList(opts.env),
            // Always: the wrapper's first stdin line is the host's (see exec-scripts.ts).
            AttachStdin: true,
            AttachStdout: true,
            AttachStderr: true,
            Tty: false,
          });
        } catch (err) {
          throw await unavailable(err, host.container, host.ids);
        }
        const exitWait = host.events.expectExecDie(exec.id);
        try {
          return { exec, exitWait, stream: (await exec.start({ hijack: true, stdin: true })) as NodeJS.ReadWriteStream & { destroy?: () => void } };
        } catch (err) {
          exitWait.cancel();
          throw await unavailable(err, host.container, host.ids);
        }
      },
      { signal: opts.signal },
    ).catch((err: unknown) => {
      leaveSetup();
      // Cancelled while the sandbox was frozen: the command never started, and the sandbox is not broken.
      if (err instanceof CancelledWhilePaused) return undefined;
      throw err;
    });
    if (!begun) return result({ cancelled: true, notStarted: true });
    const { exec, exitWait, stream } = begun;
    if (opts.signal?.aborted) {
      // Cancelled while the exec was being set up (no listener was armed yet): the wrapper starts
      // the command only once it has read the host's line, and exits at end of input without it.
      exitWait.cancel();
      stream.resume();
      stream.end();
      return result({ cancelled: true, notStarted: true });
    }
    startedExec = true;
    host.activity.started.add(exec.id);
    const setupMs = performance.now() - started;

    const emit = (s: 'stdout' | 'stderr', chunk: Buffer) => {
      (s === 'stdout' ? stdout : stderr).push(chunk);
      if (opts.onOutput) {
        try {
          opts.onOutput(s, chunk);
        } catch (err) {
          host.logger.warn({ err }, 'onOutput callback threw; output is still recorded');
        }
      }
    };
    const wrapper = new WrapperLine(WRAPPER_NAME, (chunk) => emit('stdout', chunk));
    void wrapper.root.then((root) => (token.root = root));
    // Bounded: a wrapper that never speaks must not hold pauses off for ever.
    const setupBound = setTimeout(leaveSetup, SETUP_BOUND_MS);
    void Promise.race([wrapper.root, streamEndedSoon(stream)]).finally(() => {
      clearTimeout(setupBound);
      leaveSetup();
    });
    const demux = new FrameDemuxer((s, chunk) => (s === 'stdout' ? wrapper.push(chunk) : emit(s, chunk)));
    const streamEnded = new Promise<void>((resolve) => {
      stream.on('end', () => resolve());
      stream.on('close', () => resolve());
      stream.on('error', (err: Error) => {
        host.logger.warn({ err }, 'exec stream error');
        resolve();
      });
    });
    stream.on('data', (d: Buffer) => demux.push(d));
    stream.write(`${exec.id} ${hasStdin ? 1 : 0} ${forget.join(' ')}\n`);
    if (hasStdin) stream.write(typeof opts.stdin === 'string' ? Buffer.from(opts.stdin) : (opts.stdin as Buffer));
    stream.end();
    // The command is over when its process has exited, which can be long after it closed its
    // output; limits stay armed until then.
    let exited = false;
    const exitP = waitForExit(exec, exitWait, streamEnded, host.logger).finally(() => {
      exited = true;
      wrapper.end();
    });

    let reason: KillReason | undefined;
    let killing: Promise<ControlReport | undefined> | undefined;
    let giveUp: (v: undefined) => void = () => undefined;
    const gaveUp = new Promise<undefined>((resolve) => (giveUp = resolve));
    const run: RunningExec = {
      startedAt: started,
      diskAtStart,
      kill(why) {
        if (reason !== undefined || exited) return;
        reason = why;
        killing = killTree(host, { user, root: wrapper.root }, () => exited, exitP, stream).then((k) => {
          if (k.survived) giveUp(undefined);
          return k.report;
        });
      },
    };
    const asked = opts.timeoutMs ?? host.defaultTimeoutMs;
    const timeoutMs = Math.min(asked > 0 ? asked : Infinity, opts.deadline === undefined ? Infinity : Math.max(0, opts.deadline - performance.now()));
    const timer = Number.isFinite(timeoutMs) ? setTimeout(() => run.kill('timeout'), timeoutMs) : undefined;
    const onAbort = () => run.kill('cancel');
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    // An abort during the engine calls above found no listener, and an aborted signal never calls
    // one added later: without this the command would run to its end after a Ctrl-C or a cancel.
    if (opts.signal?.aborted) onAbort();
    const untrack = host.track(run);
    let exitCode: number | undefined;
    try {
      exitCode = await Promise.race([exitP, gaveUp]);
    } finally {
      if (timer) clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
      untrack();
    }
    const exitedAt = performance.now();
    const killReport = killing ? await killing : undefined;
    const reaped = await afterCommand(host, { user, keep: opts.keepProcesses === true, root: token.root, failed: exitCode !== 0 || reason !== undefined, end: () => host.activity.end(token, exitCode !== 0 || reason !== undefined) });
    const commandFrom = token.root !== undefined && (await onThisKernel(host.container)) ? wrapperStartBound(token.root) : undefined;
    const outcome = await settleOutcome(host, {
      exitCode,
      oomBefore,
      oomKillsBefore,
      reason,
      killReport: reaped?.pidsMax !== undefined || reaped?.oomKill !== undefined ? reaped : killReport,
      commandFrom,
      user,
      startedAt: started,
      startedWall,
      endedAt: performance.now(),
    });
    const usage = await meter?.stop();
    host.activity.acknowledge(exec.id);
    if (opts.measure && host.logger.isLevelEnabled('debug')) host.logger.debug({ phase: 'exec.parts', setupMs: Math.round(setupMs), runMs: Math.round(exitedAt - started - setupMs), afterMs: Math.round(performance.now() - exitedAt) }, 'timing');
    return result({ ...outcome, timedOut: reason === 'timeout', cancelled: reason === 'cancel', ...(usage ? { usage } : {}) });
  } finally {
    // Ended above on every path that got a result; here only when the exec threw.
    host.activity.end(token, false);
    leaveSetup();
    if (!startedExec) host.activity.returnAcknowledged(forget);
    // An exec that threw never reached its reading: the sampling timer must not outlive it.
    meter?.cancel();
  }
}

/**
 * What is left to do once a command's wrapper has exited. Exit 0 means the wrapper ran to its end
 * and swept what the command left (unless kept on purpose). A failure may mean the wrapper died with
 * the command (a kill, a timeout), and a command that ran beside another may have left leftovers
 * for the other to take: then a control exec sweeps (once the lease is idle), reading the cgroup
 * counters in the same go, the freshest there are. What a `keepProcesses` command left is recorded
 * as kept by root, so no sweep and no later host takes it for a leftover.
 */
async function afterCommand(
  host: ExecHost,
  c: { user: string; keep: boolean; root: string | undefined; failed: boolean; end: () => boolean },
): Promise<ControlReport | undefined> {
  if (c.keep) {
    c.end();
    const since = c.root?.split(':')[1] ?? '0';
    await runScript(host.container, ADOPT_SCRIPT, ['adopt', since], '0:0').catch((err: unknown) => host.logger.warn({ err }, 'could not record the processes a keepProcesses command left'));
    return undefined;
  }
  const sweep = c.end();
  if (!sweep && !c.failed) return undefined;
  return runControl(host.container, { user: c.user, action: sweep ? { mode: 'sweep' } : { mode: 'counters' } }).catch((err: unknown) => {
    host.logger.warn({ err }, 'could not sweep the processes the command left');
    return undefined;
  });
}

/** How long an exec counts as in setup at most when its wrapper never says where it runs. */
const SETUP_BOUND_MS = 30_000;

/** Settles when the exec's stream ends or fails: its process is past setup either way. */
function streamEndedSoon(stream: NodeJS.ReadableStream): Promise<void> {
  return new Promise<void>((resolve) => {
    stream.once('end', resolve);
    stream.once('close', resolve);
    stream.once('error', () => resolve());
  });
}

async function unavailable(err: unknown, container: Dockerode.Container, ids: ErrorIds): Promise<BerthError> {
  const status = (err as { statusCode?: number }).statusCode;
  if (status === 404 || status === 409) {
    // A paused refusal is waited out by the caller; any other says the container is gone, and an
    // operator (or a test on CI) needs to know why.
    const why = isPausedRefusal(err) ? '' : await whyNotRunning(container);
    return new BerthError('sandbox_unavailable', `the sandbox container cannot run commands (HTTP ${status})${why ? `: ${why}` : ''}`, { ids, cause: err });
  }
  return engineError('exec', err, ids);
}
