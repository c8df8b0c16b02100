/**
 * Keeps this process's exec setups and pauses of one container apart. An exec whose process is
 * still being set up (`runc init` joining the container's cgroup) when the container is frozen
 * stays frozen inside `runc exec`, and the engine's later unpause waits on it forever: seen here
 * as a sandbox stuck `Paused`, `runc init` in the freezer ("refrigerator") and every later engine
 * call on that container hanging, until the freezer was thawed by hand. So a pause waits until no
 * exec of this process is in setup, and an exec waits until no pause of this process holds.
 * Another process's exec can still meet our pause; the engine refuses an exec into a paused
 * container (409), which `paused-wait.ts` waits out, so only the setup window itself stays open.
 */
interface GateState {
  setups: number;
  pausing: Promise<void> | undefined;
  idle: Array<() => void>;
}

const gates = new Map<string, GateState>();
/** Containers this process paused itself (setPaused), so its own commit inside the pause does not wait on itself. */
const held = new Map<string, () => void>();

function gate(containerId: string): GateState {
  let g = gates.get(containerId);
  if (!g) gates.set(containerId, (g = { setups: 0, pausing: undefined, idle: [] }));
  return g;
}

function tidy(containerId: string, g: GateState): void {
  if (g.setups === 0 && g.pausing === undefined && g.idle.length === 0) gates.delete(containerId);
}

/**
 * Enters an exec's setup: waits while this process holds the container paused. Returns the
 * function that ends the setup (once the exec's process runs or the exec ended); calling it twice
 * is harmless.
 */
export async function enterExecSetup(containerId: string): Promise<() => void> {
  const g = gate(containerId);
  while (g.pausing) await g.pausing;
  g.setups += 1;
  let left = false;
  return () => {
    if (left) return;
    left = true;
    g.setups -= 1;
    if (g.setups === 0) for (const wake of g.idle.splice(0)) wake();
    tidy(containerId, g);
  };
}

/** Takes the container's pause for this process: waits for other pauses and for every exec in setup. */
export async function holdPause(containerId: string): Promise<() => void> {
  const g = gate(containerId);
  while (g.pausing) await g.pausing;
  let release!: () => void;
  g.pausing = new Promise<void>((r) => (release = r));
  if (g.setups > 0) await new Promise<void>((r) => g.idle.push(r));
  let done = false;
  return () => {
    if (done) return;
    done = true;
    g.pausing = undefined;
    release();
    tidy(containerId, g);
  };
}

/** Runs `fn` (an engine call that pauses the container itself) under the container's pause, unless this process already holds it. */
export async function underPause<T>(containerId: string, fn: () => Promise<T>): Promise<T> {
  if (held.has(containerId)) return fn();
  const release = await holdPause(containerId);
  try {
    return await fn();
  } finally {
    release();
  }
}

/** Marks the container paused by this process until {@link releaseHeld}. */
export async function takeHeld(containerId: string): Promise<void> {
  if (held.has(containerId)) return;
  held.set(containerId, await holdPause(containerId));
}

/** Ends this process's own pause of the container (after the engine unpaused it). */
export function releaseHeld(containerId: string): void {
  const release = held.get(containerId);
  held.delete(containerId);
  release?.();
}
