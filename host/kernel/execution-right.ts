import type { Logger } from 'pino';
import type { Store } from '../store';
import type { Fence, Fencing } from './fencing';
import { SessionOwners } from './session-owners';

/** Why a started kernel stopped on its own: another host took the store's execution right. */
export interface ExecutionRightLost {
  scope: string;
  epoch: number;
  /** The host id that holds the right now, when the store still says. */
  holder: string | null;
  pid: number | null;
}

/**
 * The store-wide execution right (no fleet): one fencing epoch for every commit of the store,
 * taken at start. Losing it (a refused commit or heartbeat) stops the whole kernel; sessions a
 * worker owns live are left to that worker.
 */
export class ExecutionRight implements Fencing {
  readonly kind = 'store';
  private epoch = 0;
  private lost: ExecutionRightLost | null = null;
  private readonly listeners = new Set<(l: ExecutionRightLost) => void>();

  constructor(
    private readonly store: Store,
    private readonly logger: Logger,
    readonly scope: string,
    /** Stops the kernel; called once, when the right is lost. */
    private readonly stopKernel: () => Promise<void>,
  ) {}

  /** Takes the fencing epoch: every host before this one is fenced out from now on. */
  async acquire(hostId: string): Promise<void> {
    this.epoch = await this.store.acquireEpoch(this.scope, hostId, process.pid);
  }

  fence(): Fence {
    return { scope: this.scope, epoch: this.epoch };
  }

  fenceRefused(): void {
    void this.lose();
  }

  holds(): boolean {
    return true;
  }

  stillHeld(): () => boolean {
    // Losing the store-wide right stops the kernel, which its `stopping` check covers.
    return () => true;
  }

  async drives(): Promise<(sessionId: string) => boolean> {
    // Sessions a worker owns live are that worker's: their tasks are neither restarted nor driven here.
    const elsewhere = await SessionOwners.liveElsewhere(this.store);
    return (sessionId) => !elsewhere.has(sessionId);
  }

  async heartbeat(): Promise<void> {
    let current: boolean;
    try {
      current = await this.store.heartbeatEpoch(this.scope, this.epoch);
    } catch (err) {
      // A busy store is not a lost right; the next beat tries again.
      this.logger.warn({ err }, 'could not write the host heartbeat; trying again');
      return;
    }
    if (!current) await this.lose();
  }

  async release(): Promise<void> {
    // A clean stop says so, so status shows "no live host" at once rather than after a stale heartbeat.
    if (this.epoch > 0 && !this.lost) await this.store.releaseEpoch(this.scope, this.epoch).catch(() => false);
  }

  /** Called once when another host takes the right; at once when it already did. */
  onLost(listener: (l: ExecutionRightLost) => void): () => void {
    if (this.lost) listener(this.lost);
    else this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private async lose(): Promise<void> {
    if (this.lost) return;
    const now = await this.store.getExecutionRight(this.scope).catch(() => undefined);
    this.lost = { scope: this.scope, epoch: this.epoch, holder: now?.holder ?? null, pid: now?.pid ?? null };
    this.logger.error({ lost: this.lost }, 'another host took the execution right; stopping');
    // stop() stops scheduling at once; listeners hear of the loss before phases finish aborting.
    const stopped = this.stopKernel();
    for (const l of this.listeners) l(this.lost);
    this.listeners.clear();
    await stopped;
  }
}
