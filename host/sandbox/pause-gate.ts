/**
 * Keeps this process's own short execs (the watchdog renewal) and its own pauses of a container
 * (a paused `docker commit`, an explicit pause) apart. An exec whose start overlaps the freeze
 * deadlocks the engine (runc 1.1 here): `runc init` of the exec sits in the frozen cgroup, the
 * shim's task lock is held by that exec, and the commit's own unpause waits on the lock for ever
 * (seen: a one-step plan's fresh-lease renewal racing the upload snapshot, container paused for
 * minutes until thawed by hand). The engine refuses an exec only once the pause has begun, so
 * the check has to be ours: an exec waits while a pause is on, a pause waits for running execs.
 */
interface Gate {
  execs: number;
  pauses: number;
  /** Wakes whoever waits for the other side to end. */
  waiters: Array<() => void>;
}

const gates = new Map<string, Gate>();

function gate(containerId: string): Gate {
  let g = gates.get(containerId);
  if (!g) gates.set(containerId, (g = { execs: 0, pauses: 0, waiters: [] }));
  return g;
}

function settle(containerId: string, g: Gate): void {
  const w = g.waiters.splice(0);
  for (const wake of w) wake();
  if (g.execs === 0 && g.pauses === 0 && g.waiters.length === 0) gates.delete(containerId);
}

/** Runs a short exec of this process once no pause of the container by this process is on. */
export async function gatedExec<T>(containerId: string, fn: () => Promise<T>): Promise<T> {
  const g = gate(containerId);
  while (g.pauses > 0) await new Promise<void>((r) => g.waiters.push(r));
  g.execs += 1;
  try {
    return await fn();
  } finally {
    g.execs -= 1;
    settle(containerId, g);
  }
}

/** Marks a pause as on once this process's gated execs ended; returns its end. */
export async function beginPause(containerId: string): Promise<() => void> {
  const g = gate(containerId);
  // A pause blocks new execs at once, then waits for the ones already started.
  g.pauses += 1;
  while (g.execs > 0) await new Promise<void>((r) => g.waiters.push(r));
  let ended = false;
  return () => {
    if (ended) return;
    ended = true;
    g.pauses -= 1;
    settle(containerId, g);
  };
}

/** Runs `fn` (a paused commit) as a pause. */
export async function gatedPause<T>(containerId: string, fn: () => Promise<T>): Promise<T> {
  const end = await beginPause(containerId);
  try {
    return await fn();
  } finally {
    end();
  }
}
