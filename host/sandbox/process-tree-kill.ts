import { setTimeout as sleep } from 'node:timers/promises';
import type { ExecHost } from './exec-run';
import type { ControlReport } from './exec-scripts';
import { runControl } from './sandbox-control';

/** A wait raced against the exit: it must not keep the process alive once the race is decided. */
const wait = (ms: number) => sleep(ms, undefined, { ref: false });

/** How long to wait for the tree to die after a kill before trying again. */
const KILL_GRACE_MS = 3000;
/**
 * How long a kill waits for the wrapper to say where it runs before it detaches: a loaded engine
 * can take seconds to start an exec it already created, and giving up after a second let a command
 * killed that early run to its end.
 */
const RECORD_WAIT_MS = 30_000;

/**
 * Kills a running command: its wrapper (`pid:start`, as the wrapper said it on its first output
 * line, which the command cannot forge) and everything under it, by the process list, as the
 * command's user (it can signal nothing the command could not). What left the tree (`setsid`, a
 * double fork) is a leftover that the sweep after the exit takes. When the tree does not die, it
 * tries again a few times and then detaches from the output, so that the caller always gets a result.
 */
export async function killTree(
  host: Pick<ExecHost, 'container' | 'logger'>,
  target: { user: string; root: Promise<string | undefined> },
  hasExited: () => boolean,
  exited: Promise<unknown>,
  stream: { destroy?: () => void },
): Promise<{ report: ControlReport | undefined; survived: boolean }> {
  let report: ControlReport | undefined;
  const root = await Promise.race([target.root, exited.then(() => undefined), wait(RECORD_WAIT_MS).then(() => undefined)]);
  for (let kills = 0; root !== undefined && kills < 6 && !hasExited(); kills += 1) {
    try {
      report = await runControl(host.container, { user: target.user, action: { mode: 'tree', target: root } });
      // The wrapper is gone: the exec has exited or is about to.
      if (report.killed === undefined) await Promise.race([exited, wait(KILL_GRACE_MS)]);
    } catch (err) {
      host.logger.error({ err }, 'kill exec failed');
    }
    await Promise.race([exited, wait(KILL_GRACE_MS)]);
  }
  if (hasExited()) return { report, survived: false };
  host.logger.error({ root }, 'process tree survived the kill; detaching from it');
  stream.destroy?.();
  return { report, survived: true };
}
