import type Dockerode from 'dockerode';
import type { Logger } from 'pino';
import { LABEL } from './labels';

interface EngineEvent {
  Action?: string;
  Actor?: { ID?: string; Attributes?: Record<string, string> };
}

interface Waiter {
  code: number | undefined;
  arrived: boolean;
  wake: (() => void) | undefined;
}

/** A watch on one container's end; see {@link EngineEvents.watchExit}. */
export interface ExitWatch {
  running(): boolean | undefined;
  onExit(fn: () => void): void;
  stop(): void;
}

/** A pending wait for one exec's `exec_die` event. */
export interface ExecDieWait {
  result(timeoutMs: number): Promise<number | undefined>;
  cancel(): void;
}

/**
 * One subscription to the engine's event stream for this host's containers. It gives two things
 * without an extra round trip per exec:
 *
 * - `oom` events, one or more per OOM kill anywhere in a container's cgroup, also when only a
 *   child of an exec died and the exec itself went on;
 * - `exec_die` with the exit code;
 * - `die` and `destroy` of the containers a caller watches ({@link watchExit}): a warm pool knows
 *   its idle containers still run without asking the engine at each lease.
 *
 * Ordering invariant: dockerd handles one container's runtime events in a per-container queue, and
 * the OOM notification is raised before the killed process can be reaped. So once an exec's
 * `exec_die` has arrived, every OOM event that happened during that exec has arrived before it.
 * The one exception is the exec's own main process being the victim, where the runtime's two
 * watchers race; the caller waits briefly for a late `oom` only on exit code 137.
 */
export class EngineEvents {
  private stream: NodeJS.ReadableStream | undefined;
  private connecting: Promise<boolean> | undefined;
  private readonly ooms = new Map<string, number>();
  private readonly oomWaiters = new Map<string, Set<() => void>>();
  private readonly execWaiters = new Map<string, Waiter>();
  private readonly exitWatchers = new Map<string, () => void>();
  /** Counts the streams this subscription has had; a watch holds only while its stream lives. */
  private generation = 0;
  private closed = false;
  private partial = '';

  constructor(
    private readonly docker: Dockerode,
    private readonly hostId: string,
    private readonly logger: Logger,
  ) {}

  get connected(): boolean {
    return this.stream !== undefined;
  }

  /** Subscribes once; later calls reuse the stream. False when the engine refused or is gone. */
  ensureConnected(): Promise<boolean> {
    if (this.stream) return Promise.resolve(true);
    if (this.closed) return Promise.resolve(false);
    this.connecting ??= this.connect().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  private async connect(): Promise<boolean> {
    try {
      // dockerd subscribes before it sends the response headers, so nothing that happens after
      // this resolves can be missed.
      const stream = (await this.docker.getEvents({
        filters: { type: ['container'], event: ['oom', 'exec_die', 'die', 'destroy'], label: [`${LABEL.host}=${this.hostId}`] },
      })) as NodeJS.ReadableStream & { socket?: { unref?: () => void } };
      if (this.closed) {
        (stream as unknown as { destroy?: () => void }).destroy?.();
        return false;
      }
      // The subscription must never keep a process alive on its own.
      stream.socket?.unref?.();
      stream.on('data', (chunk: Buffer) => this.onData(chunk));
      const lost = (err?: Error) => this.onLost(stream, err);
      stream.on('error', lost);
      stream.on('end', () => lost());
      stream.on('close', () => lost());
      this.stream = stream;
      this.generation += 1;
      return true;
    } catch (err) {
      this.logger.warn({ err }, 'engine event stream unavailable; exec results fall back to inspect');
      return false;
    }
  }

  private onLost(stream: NodeJS.ReadableStream, err?: Error): void {
    if (this.stream !== stream) return;
    this.stream = undefined;
    if (!this.closed) this.logger.warn({ err }, 'engine event stream lost');
    // Nobody may wait for an event that can no longer come; callers fall back to inspect.
    for (const w of this.execWaiters.values()) {
      w.arrived = true;
      w.wake?.();
    }
    this.execWaiters.clear();
    // An exit may now go unseen: every watch says "unknown" from here on (see watchExit).
    this.exitWatchers.clear();
  }

  private onData(chunk: Buffer): void {
    const text = this.partial + chunk.toString('utf8');
    const lines = text.split('\n');
    this.partial = lines.pop() ?? '';
    for (const line of lines) {
      if (line.trim() === '') continue;
      let ev: EngineEvent;
      try {
        ev = JSON.parse(line) as EngineEvent;
      } catch {
        continue;
      }
      const id = ev.Actor?.ID;
      if (!id) continue;
      if (ev.Action === 'oom') {
        this.ooms.set(id, (this.ooms.get(id) ?? 0) + 1);
        const waiters = this.oomWaiters.get(id);
        if (waiters) for (const wake of waiters) wake();
      } else if (ev.Action === 'die' || ev.Action === 'destroy') {
        this.exitWatchers.get(id)?.();
      } else if (ev.Action === 'exec_die') {
        const execId = ev.Actor?.Attributes?.execID;
        const waiter = execId === undefined ? undefined : this.execWaiters.get(execId);
        if (execId !== undefined && waiter) {
          // Answered: the waiter (and the timer its wake holds) goes, or every exec of a long run leaves one behind.
          this.execWaiters.delete(execId);
          const code = Number(ev.Actor?.Attributes?.exitCode);
          waiter.code = Number.isFinite(code) ? code : undefined;
          waiter.arrived = true;
          waiter.wake?.();
        }
      }
    }
  }

  /** OOM events seen so far for a container; compare before and after an exec. */
  oomCount(containerId: string): number {
    return this.ooms.get(containerId) ?? 0;
  }

  /**
   * Starts listening for one exec's `exec_die`. Call before starting the exec; then `result(ms)`
   * after its stream ended gives the exit code, or undefined when the stream is down or the event
   * does not come within `ms`.
   */
  expectExecDie(execId: string): ExecDieWait {
    const waiter: Waiter = { code: undefined, arrived: false, wake: undefined };
    if (this.stream) this.execWaiters.set(execId, waiter);
    return {
      result: (timeoutMs: number) => {
        if (waiter.arrived || !this.execWaiters.has(execId)) {
          this.execWaiters.delete(execId);
          return Promise.resolve(waiter.code);
        }
        return new Promise((resolve) => {
          const timer = setTimeout(() => {
            this.execWaiters.delete(execId);
            resolve(undefined);
          }, timeoutMs);
          // Not unref'd: the event socket is, so this timer is what keeps an awaiting process alive.
          waiter.wake = () => {
            clearTimeout(timer);
            resolve(waiter.code);
          };
        });
      },
      cancel: () => {
        this.execWaiters.delete(execId);
      },
    };
  }

  /** Waits until the OOM count of a container exceeds `seen`, or `timeoutMs` passes. */
  async waitOom(containerId: string, seen: number, timeoutMs: number): Promise<boolean> {
    if (this.oomCount(containerId) > seen) return true;
    if (!this.stream) return false;
    return new Promise((resolve) => {
      const set = this.oomWaiters.get(containerId) ?? new Set<() => void>();
      this.oomWaiters.set(containerId, set);
      const done = (value: boolean) => {
        clearTimeout(timer);
        set.delete(wake);
        if (set.size === 0) this.oomWaiters.delete(containerId);
        resolve(value);
      };
      const wake = () => done(true);
      const timer = setTimeout(() => done(false), timeoutMs);
      set.add(wake);
    });
  }

  /**
   * Watches a container for its end (`die` or `destroy`). Call before the container starts, after
   * {@link ensureConnected}: `running()` is false once the end was seen, true while the stream that
   * was live when the watch began still is (dockerd sends a container's events in order and subscribes
   * before it answers, so no end can slip by), and undefined when that stream is down or was lost
   * meanwhile (the caller asks the engine). `onExit` is called once at the end, if it is seen.
   * `stop()` ends the watch.
   */
  watchExit(containerId: string): ExitWatch {
    let ended = false;
    let listener: (() => void) | undefined;
    const stream = this.stream;
    const generation = this.generation;
    if (stream) {
      this.exitWatchers.set(containerId, () => {
        if (ended) return;
        ended = true;
        this.exitWatchers.delete(containerId);
        listener?.();
      });
    }
    return {
      running: () => (ended ? false : stream !== undefined && this.stream === stream && this.generation === generation ? true : undefined),
      onExit: (fn) => {
        listener = fn;
      },
      stop: () => {
        listener = undefined;
        this.exitWatchers.delete(containerId);
      },
    };
  }

  forget(containerId: string): void {
    this.ooms.delete(containerId);
  }

  close(): void {
    this.closed = true;
    const s = this.stream as unknown as { destroy?: () => void } | undefined;
    this.stream = undefined;
    s?.destroy?.();
    for (const w of this.execWaiters.values()) {
      w.arrived = true;
      w.wake?.();
    }
    this.execWaiters.clear();
  }
}
