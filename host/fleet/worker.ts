import type { Logger } from 'pino';
import type { Kernel } from '../kernel';
import type { SandboxHost } from '../sandbox';
import type { Store } from '../store';
import { releaseDrainedSandboxes } from './drain-sandboxes';

export interface WorkerOptions {
  store: Store;
  /** A kernel that claims nothing by itself (KernelOptions.claim `none`): the worker claims for it. */
  kernel: Kernel;
  logger: Logger;
  hostId: string;
  pid: number;
  /** Sessions (runs) driven at once. */
  concurrency: number;
  tags: string[];
  leaseTtlMs: number;
  /** How often the worker looks for runs to claim. */
  claimEveryMs: number;
  /** This engine's sandboxes: a drain removes those of the sessions it gives up (drain-sandboxes.ts). */
  sandbox?: SandboxHost;
  /** Called after each claim round (the CLI sweeps ended runs' sandboxes there). */
  onTick?: () => Promise<void>;
  /** A session's work ended and it was released (the CLI removes the run's sandboxes and sweeps). */
  onReleased?: (sessionId: string) => Promise<void>;
  /** A session was claimed; `previous` is the owner it was taken from (a crashed or stale host) and why it could be. */
  onClaim?: (sessionId: string, epoch: number, previous: { holder: string; why: 'lease ran out' | 'process is gone' } | null) => void;
}

/**
 * `berth worker`: claims runnable runs (and runs whose owner's lease ran out) from the store,
 * drives them through its kernel, renews their leases (the kernel's heartbeat) and releases a run's
 * session once nothing of it is left to do. The claim itself is the store's compare-and-set on the
 * session's epoch, so two workers racing for one run get it once.
 */
export class Worker {
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> | null = null;
  private draining = false;
  readonly id: string;

  constructor(private readonly o: WorkerOptions) {
    this.id = `${o.hostId}:${o.pid}`;
  }

  async start(): Promise<void> {
    await this.beat();
    await this.o.kernel.start();
    // A run that moved (often: ended) frees a slot now rather than at the next round.
    this.o.kernel.onCommit((e) => void (e.runIds.length > 0 && !this.draining && this.tick()));
    await this.tick();
    this.timer = setInterval(() => void this.tick(), this.o.claimEveryMs);
  }

  /** SIGTERM: no new claims; phases in flight get `graceMs`; leases are released. */
  async drain(graceMs: number): Promise<void> {
    this.draining = true;
    if (this.timer) clearInterval(this.timer);
    await this.ticking;
    const held = this.o.kernel.ownedSessions();
    await this.o.kernel.drain(graceMs);
    if (this.o.sandbox) {
      const removed = await releaseDrainedSandboxes({ store: this.o.store, sandbox: this.o.sandbox, logger: this.o.logger }, held).catch((err: unknown) => {
        this.o.logger.warn({ err }, 'could not remove the sandboxes of drained runs; their watchdogs stop them and a sweep removes them');
        return [];
      });
      if (removed.length) this.o.logger.info({ containers: removed.map((r) => r.containerId) }, 'removed the sandboxes of drained runs');
    }
    await this.o.store.stopHost(this.id).catch(() => {});
  }

  private tick(): Promise<void> {
    this.ticking ??= this.round()
      .catch((err: unknown) => this.o.logger.warn({ err }, 'worker round failed; trying again'))
      .finally(() => (this.ticking = null));
    return this.ticking;
  }

  private beat(): Promise<void> {
    return this.o.store.heartbeatHost({ id: this.id, hostId: this.o.hostId, pid: this.o.pid, tags: this.o.tags, concurrency: this.o.concurrency });
  }

  private async round(): Promise<void> {
    if (this.draining) return;
    await this.beat();
    await this.releaseFinished();
    const free = this.o.concurrency - this.o.kernel.ownedSessions().length;
    if (free > 0) {
      let room = free;
      // More candidates than room: some may need tags this worker lacks.
      for (const sessionId of await this.o.kernel.available(free * 4 + 8)) {
        if (this.draining || room <= 0) break;
        if (!(await this.tagsMatch(sessionId))) continue;
        const claim = await this.o.kernel.claim(sessionId);
        // Another host was faster (or the owner renewed): the compare-and-set said no.
        if (!claim.ok) continue;
        this.o.logger.info({ sessionId, epoch: claim.epoch, from: claim.previous?.holder ?? null }, 'claimed session');
        const p = claim.previous;
        this.o.onClaim?.(sessionId, claim.epoch, p && p.stoppedAt === null ? { holder: `${p.holder}:${p.pid}`, why: p.leaseUntil < claim.now ? 'lease ran out' : 'process is gone' } : null);
        room--;
      }
    }
    await this.o.onTick?.();
  }

  /** A run submitted with tags is claimed only by a worker that has every one of them. */
  private async tagsMatch(sessionId: string): Promise<boolean> {
    const meta = (await this.o.store.getSession(sessionId))?.meta as { tags?: unknown } | null | undefined;
    const wanted = Array.isArray(meta?.tags) ? (meta.tags as unknown[]).map(String) : [];
    return wanted.every((t) => this.o.tags.includes(t));
  }

  /** A session with no unfinished task is done here: released so status shows no owner. */
  private async releaseFinished(): Promise<void> {
    for (const { sessionId } of this.o.kernel.ownedSessions()) {
      const open = await this.o.store.listTasks({ sessionId, statuses: ['pending', 'running', 'waiting', 'sleeping', 'completing'] });
      if (open.length > 0) continue;
      await this.o.kernel.release(sessionId);
      await this.o.onReleased?.(sessionId).catch((err: unknown) => this.o.logger.warn({ err, sessionId }, 'clean-up after a run end failed; the next sweep does it'));
    }
  }
}
