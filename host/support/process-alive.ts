import { readFileSync } from 'node:fs';

/**
 * Whether a process of this machine can still act: it exists (EPERM: under another user) and is
 * not a zombie. A SIGKILLed host stays a zombie until its parent reaps it, which a parent that
 * never waits (a shell that `exec`ed another program, a container's init that reaps late: ~0.7 s
 * on the CI machine) delays indefinitely; `kill(pid, 0)` succeeds on a zombie, so a dead owner read
 * as live, and `berth cancel` right after the kill left the run `cancelling` with nobody to carry
 * it out. Without /proc (not Linux) the signal's answer stands.
 */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch (err) {
    // Gone between the two reads; any other failure (no /proc) leaves the signal's answer.
    return (err as NodeJS.ErrnoException).code !== 'ENOENT';
  }
  // `pid (comm) S ...`: comm may hold spaces and parentheses, the state follows the last `)`.
  const state = stat.charAt(stat.lastIndexOf(')') + 2);
  return state !== 'Z' && state !== 'X';
}
