import type Dockerode from 'dockerode';
import { setTimeout as sleep } from 'node:timers/promises';
import { CONTROL_DIR } from './container-options';
import type { ExecHost } from './exec-run';
import { ORPHAN_SCRIPT, SLOT_OWNERS_SCRIPT, type ControlReport } from './exec-scripts';
import { runControl, runScript } from './sandbox-control';

/** How long to wait for the tree to die after a kill before trying again. */
const KILL_GRACE_MS = 3000;
/** How long a kill waits for the wrapper to record its pid before it detaches. */
const RECORD_WAIT_MS = 30_000;

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
  // Two budgets: kills of a recorded tree that did not die, and waits for a wrapper that has not
  // recorded its pid yet (a loaded engine can take seconds to start an exec it already created;
  // giving up after a second let a command killed that early run to its end).
  let kills = 0;
  const recordBy = Date.now() + RECORD_WAIT_MS;
  for (let attempt = 0; kills < 6 && !hasExited(); attempt += 1) {
    let killed = false;
    try {
      report = await runControl(host.container, target);
      killed = report.killed !== undefined;
    } catch (err) {
      host.logger.error({ err }, 'kill exec failed');
    }
    if (killed) kills += 1;
    else if (Date.now() > recordBy) break;
    await Promise.race([exited, sleep(killed ? KILL_GRACE_MS : Math.min(50 * (attempt + 1), 500))]);
  }
  if (hasExited()) return { report, survived: false };
  host.logger.error({ slotFile: target.slotFile }, 'process tree survived the kill; detaching from it');
  stream.destroy?.();
  return { report, survived: true };
}

/**
 * Kills the process trees of commands that a dead host started and nobody now runs: on attach,
 * no command of this host runs in the container yet, and the caller holds the run's execution
 * right (the kernel's fence), so every slot file left is such a command's (a command that ends
 * removes its own; one kept with `keepProcesses` too). One exec lists the files' owners, then one
 * per owner, as that owner, kills and removes. Returns the number of sessions killed.
 */
export async function killOrphans(container: Dockerode.Container, user: string): Promise<number> {
  const owners = (await runScript(container, SLOT_OWNERS_SCRIPT, [CONTROL_DIR], user)).split('\n').filter((l) => /^\d+:\d+$/.test(l.trim()));
  let killed = 0;
  for (const owner of owners) {
    const out = await runScript(container, ORPHAN_SCRIPT, [CONTROL_DIR], owner.trim());
    killed += Number(/orphans=(\d+)/.exec(out)?.[1] ?? 0);
  }
  return killed;
}
