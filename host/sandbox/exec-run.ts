import type Dockerode from 'dockerode';
import { randomBytes } from 'node:crypto';
import { posix } from 'node:path';
import type { Logger } from 'pino';
import { BerthError, type ErrorIds } from '../errors';
import { CappedOutput } from './capped-output';
import { CONTROL_DIR } from './container-options';
import type { DiskGuard } from './disk-guard';
import { FrameDemuxer } from './docker-frames';
import { engineError } from './engine-errors';
import type { EngineEvents } from './engine-events';
import { WRAPPER_SCRIPT, type ControlReport } from './exec-scripts';
import type { ExecOptions, ExecResult } from './exec-types';
import { settleOutcome, waitForExit } from './exec-outcome';
import { killTree } from './process-tree-kill';
import { runControl } from './sandbox-control';
import { startUsageMeter } from './exec-usage';

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
  acquireSlot(): number;
  releaseSlot(slot: number): void;
  /** Registers a running exec so a disk-limit hit can kill it; returns the unregister function. */
  track(run: RunningExec): () => void;
}

export type KillReason = 'timeout' | 'cancel' | 'disk';

/** A running exec as its lease sees it. */
export interface RunningExec {
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

const slotUser = (user: string) => user.replace(/[^0-9A-Za-z_]/g, '_');

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
  if (opts.signal?.aborted) return result({ cancelled: true });

  const slot = host.acquireSlot();
  let meter: Awaited<ReturnType<typeof startUsageMeter>> | undefined;
  const slotFile = `${CONTROL_DIR}/.berth-exec.${slotUser(user)}.${slot}`;
  const nonce = randomBytes(8).toString('hex');
  try {
    await host.events.ensureConnected();
    const oomBefore = host.events.oomCount(host.containerId);
    meter = opts.measure ? await startUsageMeter(host.container, host.logger) : undefined;
    const hasStdin = opts.stdin !== undefined;
    let exec: Dockerode.Exec;
    try {
      exec = await host.container.exec({
        Cmd: ['/bin/sh', '-c', WRAPPER_SCRIPT, slotFile, nonce, opts.keepProcesses ? '1' : '0', ...argv],
        User: user,
        WorkingDir: opts.cwd === undefined ? host.workspace : posix.resolve(host.workspace, opts.cwd),
        Env: envList(opts.env),
        AttachStdin: hasStdin,
        AttachStdout: true,
        AttachStderr: true,
        Tty: false,
      });
    } catch (err) {
      throw unavailable(err, host.ids);
    }
    const exitWait = host.events.expectExecDie(exec.id);
    let stream: NodeJS.ReadWriteStream & { destroy?: () => void };
    try {
      stream = (await exec.start({ hijack: true, stdin: hasStdin })) as typeof stream;
    } catch (err) {
      exitWait.cancel();
      throw unavailable(err, host.ids);
    }

    const demux = new FrameDemuxer((s, chunk) => {
      (s === 'stdout' ? stdout : stderr).push(chunk);
      if (opts.onOutput) {
        try {
          opts.onOutput(s, chunk);
        } catch (err) {
          host.logger.warn({ err }, 'onOutput callback threw; output is still recorded');
        }
      }
    });
    const streamEnded = new Promise<void>((resolve) => {
      stream.on('end', () => resolve());
      stream.on('close', () => resolve());
      stream.on('error', (err: Error) => {
        host.logger.warn({ err }, 'exec stream error');
        resolve();
      });
    });
    stream.on('data', (d: Buffer) => demux.push(d));
    if (hasStdin) {
      stream.write(typeof opts.stdin === 'string' ? Buffer.from(opts.stdin) : (opts.stdin as Buffer));
      stream.end();
    }
    // The command is over when its process has exited, which can be long after it closed its
    // output; limits stay armed until then.
    let exited = false;
    const exitP = waitForExit(exec, exitWait, streamEnded).finally(() => {
      exited = true;
    });

    let reason: KillReason | undefined;
    let killing: Promise<ControlReport | undefined> | undefined;
    let giveUp: (v: undefined) => void = () => undefined;
    const gaveUp = new Promise<undefined>((resolve) => (giveUp = resolve));
    const run: RunningExec = {
      kill(why) {
        if (reason !== undefined || exited) return;
        reason = why;
        killing = killTree(host, { user, slotFile, nonce }, () => exited, exitP, stream).then((k) => {
          if (k.survived) giveUp(undefined);
          return k.report;
        });
      },
    };
    const timeoutMs = opts.timeoutMs ?? host.defaultTimeoutMs;
    const timer = timeoutMs > 0 && Number.isFinite(timeoutMs) ? setTimeout(() => run.kill('timeout'), timeoutMs) : undefined;
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
    const killReport = killing ? await killing : undefined;
    // Exit 0 means the wrapper ran to its end: it killed what the command left in its session
    // (unless kept on purpose) and removed the slot file. Otherwise (a failure, or the wrapper was
    // killed with the command) a control exec does both, so a later host never takes a finished
    // command for an orphan; it reads the cgroup counters in the same go, the freshest there are.
    const reaped =
      exitCode === 0 && reason === undefined
        ? undefined
        : await runControl(host.container, { user, slotFile, nonce, mode: opts.keepProcesses ? 'forget' : 'reap' }).catch((err: unknown) => {
            host.logger.warn({ err }, 'could not reap the processes the command left');
            return undefined;
          });
    const outcome = await settleOutcome(host, {
      exitCode,
      oomBefore,
      reason,
      killReport: reaped?.pidsMax !== undefined || reaped?.oomKill !== undefined ? reaped : killReport,
      user,
      startedAt: started,
      startedWall,
      endedAt: performance.now(),
    });
    const usage = await meter?.stop();
    return result({ ...outcome, timedOut: reason === 'timeout', cancelled: reason === 'cancel', ...(usage ? { usage } : {}) });
  } finally {
    host.releaseSlot(slot);
    // An exec that threw never reached its reading: the sampling timer must not outlive it.
    meter?.cancel();
  }
}

function unavailable(err: unknown, ids: ErrorIds): BerthError {
  const status = (err as { statusCode?: number }).statusCode;
  if (status === 404 || status === 409) {
    return new BerthError('sandbox_unavailable', `the sandbox container cannot run commands (HTTP ${status})`, { ids, cause: err });
  }
  return engineError('exec', err, ids);
}

