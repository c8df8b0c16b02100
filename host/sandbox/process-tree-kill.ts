import { setTimeout as sleep } from 'node:timers/promises';
import type { ExecHost } from './exec-run';
import type { ControlReport } from './exec-scripts';
import { runControl } from './sandbox-control';

/** How long to wait for the tree to die after a kill before trying again. */
const KILL_GRACE_MS = 3000;

/**
 * Kills the recorded tree and waits for the output stream to close. When the tree does not die
 * (the kill exec ran before the wrapper recorded its pid, or a process left the session), it tries
 * again a few times and then detaches from the output, so that the caller always gets a result.
 */
export async function killTree(
  host: Pick<ExecHost, 'container' | 'logger'>,
  target: { user: string; slotFile: string; nonce: string },
  hasExited: () => boolean,
  exited: Promise<unknown>,
  stream: { destroy?: () => void },
): Promise<{ report: ControlReport | undefined; survived: boolean }> {
  let report: ControlReport | undefined;
  for (let attempt = 0; attempt < 6 && !hasExited(); attempt += 1) {
    let killed = false;
    try {
      report = await runControl(host.container, target);
      killed = report.killed !== undefined;
    } catch (err) {
      host.logger.error({ err }, 'kill exec failed');
    }
    // Nothing recorded yet means the wrapper has not run; it will in a moment.
    await Promise.race([exited, sleep(killed ? KILL_GRACE_MS : 50 * (attempt + 1))]);
  }
  if (hasExited()) return { report, survived: false };
  host.logger.error({ slotFile: target.slotFile }, 'process tree survived the kill; detaching from it');
  stream.destroy?.();
  return { report, survived: true };
}
