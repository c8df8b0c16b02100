import type Dockerode from 'dockerode';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ExecDieWait } from './engine-events';
import type { ExecHost, KillReason } from './exec-run';
import type { ControlReport } from './exec-scripts';
import { runControl } from './sandbox-control';
import { cgroupOomKills } from './cgroup-counters';

/** How long the exit event may lag behind the end of the output stream. */
const EXEC_DIE_WAIT_MS = 1000;
/** How long a lone exit 137 may wait for the OOM event of its own main process. */
const LATE_OOM_WAIT_MS = 300;
const SIGXFSZ_EXIT = 128 + 25;
const EXIT_POLL_MS = 50;
/** Failed inspections of an exec, other than a 404, before its exit code is given up on. */
const EXIT_INSPECT_TRIES = 8;

export interface Outcome {
  exitCode: number;
  oomKilled: boolean;
  pidsLimited: boolean;
  diskExceeded: boolean;
  sandboxLost: boolean;
}

/**
 * Settles what happened to an exec whose output stream has ended: its exit code and which limits
 * it hit. Cheap on the common path (exit 0, small layer): one event that is already on its way.
 */
export async function settleOutcome(
  host: ExecHost,
  run: {
    exitCode: number | undefined;
    oomBefore: number;
    /** The cgroup's OOM kill counter before the exec, when this machine can read it. */
    oomKillsBefore: number | undefined;
    reason: KillReason | undefined;
    killReport: ControlReport | undefined;
    /** No later than the wrapper's start ({@link wrapperStartBound}), when known. */
    commandFrom?: number;
    user: string;
    startedAt: number;
    /** Wall-clock start, to tell a container restarted during the exec. */
    startedWall: number;
    endedAt: number;
  },
): Promise<Outcome> {
  const exitCode = run.exitCode;
  // A command we did not kill that died of a signal (or whose end could not be learned) may have
  // died with its container: then its exit code is the engine's, not the command's.
  if (run.reason === undefined && (exitCode === undefined || exitCode >= 128) && (await containerLost(host, run.startedWall))) {
    host.logger.warn({ exitCode }, 'the sandbox container stopped or vanished during the exec; the command is lost');
    return { exitCode: -1, oomKilled: false, pidsLimited: false, diskExceeded: false, sandboxLost: true };
  }
  if (exitCode === undefined) host.logger.warn({ containerId: host.containerId }, 'the exec ended with no exit code the engine could give; reported as -1');
  let oomKilled = host.events.oomCount(host.containerId) > run.oomBefore;
  const oomKillsAfter = !oomKilled && run.oomKillsBefore !== undefined ? await cgroupOomKills(host.container) : undefined;
  if (oomKillsAfter !== undefined) {
    // Exact, and in time for a command that exits 0 after a child of it was killed.
    oomKilled = oomKillsAfter > run.oomKillsBefore!;
  } else if (!oomKilled && exitCode === 137 && run.reason === undefined && host.events.connected) {
    oomKilled = await host.events.waitOom(host.containerId, run.oomBefore, LATE_OOM_WAIT_MS);
  }
  // The cgroup counters need an exec of their own, so they are read only when something went
  // wrong: a kill by us (the kill exec reports them) or a non-zero exit.
  let report = run.killReport;
  // Also after the sweep's exec failed: under a fork bomb it may find no pid free, and this later
  // one is what reports pidsLimited (skipping it failed the fork-bomb test under load).
  if (report === undefined && exitCode !== 0) {
    report = await runControl(host.container, { user: run.user, action: { mode: 'counters' } }).catch((err: unknown) => {
      host.logger.warn({ err }, 'could not read cgroup counters after exec');
      return undefined;
    });
  }
  let pidsLimited = false;
  if (report?.pidsMax !== undefined) {
    pidsLimited = report.pidsMax > host.counters.pidsMax;
    host.counters.pidsMax = Math.max(host.counters.pidsMax, report.pidsMax);
  }
  if (report?.oomKill !== undefined) {
    // The kernel counter stands in for the event stream when that was down for this exec.
    if (report.oomKill > host.counters.oomKill && !host.events.connected) oomKilled = true;
    host.counters.oomKill = Math.max(host.counters.oomKill, report.oomKill);
  }
  host.disk.noteRunTime(Math.max(run.startedAt, run.commandFrom ?? run.startedAt), run.endedAt);
  let diskExceeded = run.reason === 'disk' || exitCode === SIGXFSZ_EXIT;
  if (!diskExceeded && host.disk.mayExceed()) {
    diskExceeded = (await host.disk.measure(run.endedAt).catch(() => 0)) > host.disk.limitBytes;
  }
  return { exitCode: exitCode ?? -1, oomKilled, pidsLimited, diskExceeded, sandboxLost: false };
}

/** /proc's clock ticks per second (USER_HZ), the same on every Linux architecture. */
const USER_HZ = 100;

/** The machine's uptime in seconds (`/proc/uptime`, 10 ms steps), or NaN. */
function uptimeS(): number {
  try {
    return Number(readFileSync('/proc/uptime', 'latin1').split(' ')[0]);
  } catch {
    return Number.NaN;
  }
}

/**
 * A `performance.now()` instant no later than the start of the exec's wrapper, whose `pid:start`
 * (its kernel start time, in clock ticks since boot) is `root`; undefined when that cannot be told.
 * The wrapper starts only after the engine has set the exec up (most of a short command's time),
 * and the command after the wrapper: so the disk guard's assumed write rate applies from here, not
 * from the exec's creation. Only for a container on this machine's kernel (its start times count
 * this machine's uptime). Sound for a lower bound: the performance clock is read before the
 * uptime, both uptime and start time are floored to a tick, and the uptime clock counts suspended
 * time as well (so it may only overstate what has elapsed).
 */
export function wrapperStartBound(root: string | undefined, clocks: { perf: () => number; uptimeS: () => number } = { perf: () => performance.now(), uptimeS }): number | undefined {
  const ticks = Number(root?.split(':')[1]);
  if (!root || !Number.isSafeInteger(ticks) || ticks <= 0) return undefined;
  const now = clocks.perf();
  const up = clocks.uptimeS();
  if (!Number.isFinite(up)) return undefined;
  const elapsedMs = (up + 1 / USER_HZ - ticks / USER_HZ) * 1000;
  return elapsedMs >= 0 ? now - elapsedMs : undefined;
}

/** Whether the container is gone, not running, or was (re)started after `sinceWall`. */
async function containerLost(host: ExecHost, sinceWall: number): Promise<boolean> {
  try {
    const info = await host.container.inspect();
    if (!info.State.Running || info.State.Restarting) return true;
    // Docker's timestamps have nanoseconds; a start after the exec began means a restart in between.
    return Date.parse(info.State.StartedAt) > sinceWall + 1000;
  } catch (err) {
    const status = (err as { statusCode?: number }).statusCode;
    if (status === 404) return true;
    host.logger.warn({ err }, 'could not inspect the container after a killed exec');
    return false;
  }
}

/**
 * The exit code of an exec, once its process has exited: from its `exec_die` event, which follows
 * the end of the output within a few milliseconds. When the event does not come (the stream is
 * down, or the process closed its output and lives on), the exec is polled until it has exited.
 * Undefined when the exec or its container is gone.
 */
export async function waitForExit(exec: Dockerode.Exec, wait: ExecDieWait, outputEnded: Promise<void>, logger?: ExecHost['logger']): Promise<number | undefined> {
  await outputEnded;
  const fromEvent = await wait.result(EXEC_DIE_WAIT_MS);
  if (fromEvent !== undefined) return fromEvent;
  let failures = 0;
  for (;;) {
    let info: Dockerode.ExecInspectInfo;
    try {
      info = await exec.inspect();
    } catch (err) {
      // Only a 404 says the exec is gone. A loaded engine's refused or reset request is asked
      // again: taking it for "gone" turned a real exit 137 into -1 (CI, the memory-limit test).
      const status = (err as { statusCode?: number }).statusCode;
      if (status === 404 || ++failures > EXIT_INSPECT_TRIES) {
        logger?.warn({ err, execId: exec.id, failures }, 'could not learn the exit code of an exec');
        return undefined;
      }
      await sleep(EXIT_POLL_MS * failures);
      continue;
    }
    if (!info.Running && info.ExitCode !== null && info.ExitCode !== undefined) return info.ExitCode;
    await sleep(EXIT_POLL_MS);
  }
}
