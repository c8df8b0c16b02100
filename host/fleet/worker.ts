import type { Logger } from 'pino';
import type { Kernel } from '../kernel';
import type { SandboxHost } from '../sandbox';
import type { Store } from '../store';
import { releaseDrainedSandboxes } from './drain-sandboxes';
import type { PlacementCheck } from './placement';

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
  /** Which runs this worker can start on its engine (placement.ts); without one it claims every run its tags allow. */
  placement?: PlacementCheck;
  /** An operator asked this worker to drain (`berth drain`): the caller drains it as on SIGTERM. */
  onDrainRequested?: () => void;
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
  /** A tick asked for while a round ran: one more round follows it. */
  private again = false;
  private draining = false;
  /** Runs the last round left to other workers, and why (reported with the heartbeat). */
  private left: Array<{ sessionId: string; runId: string | null; why: string }> = [];
  private lastBeatAt = 0;
  private lastRecoveryScanAt = 0;
  /** Told when the next round ends (start() waits for the first). */
  private roundEnded: (() => void) | null = null;
  /** Tags each candidate session asked for (fixed at submission): read once, not at every round. */
  private readonly wantedTags = new Map<string, string[]>();
  readonly id: string;

  constructor(private readonly o: WorkerOptions) {
    this.id = `${o.hostId}:${o.pid}`;
  }

  async start(): Promise<void> {
    await this.beat();
    await this.o.kernel.start();
    // A run that moved (often: ended) frees a slot now rather than at the next round.
    this.o.kernel.onCommit((e) => void (e.runIds.length > 0 && !this.draining && this.tick()));
    this.timer = setInterval(() => void this.tick(), this.o.claimEveryMs);
    // The first round, not the rounds it leads to: while runs keep moving, each commit asks for
    // one more round (tick), and a start that awaited all of them returned only once the store had
    // no work left (`berth worker` printed its start line and heeded SIGTERM only then).
    await new Promise<void>((resolve) => {
      this.roundEnded = resolve;
      void this.tick();
    });
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
    // A run that ends while a round is under way (after it counted the free slots) must start
    // another round: joining the running one left the slot empty until the next commit or timer
    // (test/integration/worker-claims.test.ts timed out so under load).
    if (this.ticking) {
      this.again = true;
      return this.ticking;
    }
    this.ticking = (async () => {
      do {
        this.again = false;
        await this.round().catch((err: unknown) => this.o.logger.warn({ err }, 'worker round failed; trying again'));
        this.roundEnded?.();
        this.roundEnded = null;
      } while (this.again && !this.draining);
    })().finally(() => (this.ticking = null));
    return this.ticking;
  }

  private beat(): Promise<void> {
    const report = { slotsInUse: this.o.kernel.ownedSessions().length, left: this.left };
    return this.o.store.heartbeatHost({ id: this.id, hostId: this.o.hostId, pid: this.o.pid, tags: this.o.tags, concurrency: this.o.concurrency, report });
  }

  /**
   * Whether an operator asked this worker to drain (`berth drain`, recorded on its hosts row). Its
   * own row only: the rows of stopped worker processes stay, one more at each restart of a worker.
   */
  private async drainRequested(): Promise<boolean> {
    return (await this.o.store.getHost(this.id))?.drainRequestedAt != null;
  }

  private async round(): Promise<void> {
    if (this.draining) return;
    // A round also runs at each run-moving commit (many a second under load); the heartbeat and the
    // drain check keep the timer's pace. Each is a store write or read of the shared hosts table,
    // and on SQLite the beat is a flushed write under the one write lock every worker needs.
    if (Date.now() - this.lastBeatAt >= this.o.claimEveryMs) {
      this.lastBeatAt = Date.now();
      await this.beat();
      if (await this.drainRequested()) {
        this.o.logger.info('drain requested by an operator');
        this.o.onDrainRequested?.();
        return;
      }
    }
    await this.releaseFinished();
    const room = this.o.concurrency - this.o.kernel.ownedSessions().length;
    const left: typeof this.left = [];
    // More candidates than room: some may need tags this worker lacks, or an image it cannot get.
    let looked = room > 0;
    if (room > 0) await this.claimSome(await this.o.kernel.available(room * 4 + 8), room, left);
    // A run whose owner died may take one slot beyond --concurrency: its recovery should not wait
    // until one of this worker's runs ends (a busy worker took 32.8 s after a 10 s lease ran out).
    // Only a full worker looks (one with room claimed from a list that held such runs too).
    // Asked of the store as such (one read), at the timer's pace: a full worker used to read every
    // candidate's session and owner at each run-moving commit (~8 reads per run), and its list of
    // candidates went stale meanwhile, so its claims lost to the other workers'.
    if (!this.draining && this.o.kernel.ownedSessions().length === this.o.concurrency && Date.now() - this.lastRecoveryScanAt >= this.o.claimEveryMs) {
      this.lastRecoveryScanAt = Date.now();
      looked = true;
      await this.claimSome(await this.o.kernel.available(8, { orphaned: true }), 1, left, true);
    }
    // A round that looked at no candidate keeps the last report of those left to others.
    if (looked) this.left = left;
    await this.o.onTick?.();
  }

  /**
   * Claims up to `n` of `candidates` this worker can take (tags, placement), in a random order,
   * `n` at a time: each claim is a flushed write and its adoption a read, and one after another
   * they were the whole round's time (a round was busy 93-98 % of the wall time in the fleet bench,
   * one freed slot refilled per ~12 ms on PostgreSQL, ~25 ms with two workers), so a worker's runs
   * waited for the round rather than for the store or a core.
   */
  private async claimSome(candidates: string[], n: number, left: typeof this.left, recovery = false): Promise<void> {
    // In a random order: workers asking at once get the same oldest candidates, and claiming them
    // in the same order makes every claim but one wait for the winner's commit and then lose.
    const queue = shuffled(candidates);
    // Slots a claim in flight has taken (given back when it loses): never more than `n` claimed.
    let open = n;
    const lane = async (): Promise<void> => {
      while (!this.draining && open > 0) {
        const sessionId = queue.shift();
        if (sessionId === undefined) return;
        if (!(await this.tagsMatch(sessionId))) continue;
        const place = (await this.o.placement?.check(sessionId).catch(() => ({ ok: true as const }))) ?? { ok: true as const };
        if (!place.ok) {
          if (!left.some((l) => l.sessionId === sessionId)) left.push({ sessionId, runId: place.runId, why: place.why });
          continue;
        }
        // Checked again: another lane may have filled the last slot while this one read.
        if (this.draining || open <= 0) return;
        open--;
        let claim: Awaited<ReturnType<Kernel['claim']>>;
        try {
          claim = await this.o.kernel.claim(sessionId);
        } catch (err) {
          open++;
          throw err;
        }
        // Another host was faster (or the owner renewed): the compare-and-set said no.
        if (!claim.ok) {
          open++;
          continue;
        }
        this.o.logger.info({ sessionId, epoch: claim.epoch, from: claim.previous?.holder ?? null, overSlots: recovery }, 'claimed session');
        const p = claim.previous;
        this.o.onClaim?.(sessionId, claim.epoch, p && p.stoppedAt === null ? { holder: `${p.holder}:${p.pid}`, why: p.leaseUntil < claim.now ? 'lease ran out' : 'process is gone' } : null);
      }
    };
    // Every lane runs to its end before the round goes on (a failed claim is reported after).
    const ends = await Promise.allSettled(Array.from({ length: Math.min(n, queue.length) }, lane));
    const failed = ends.find((e): e is PromiseRejectedResult => e.status === 'rejected');
    if (failed) throw failed.reason;
  }

  /** A run submitted with tags is claimed only by a worker that has every one of them. */
  private async tagsMatch(sessionId: string): Promise<boolean> {
    let wanted = this.wantedTags.get(sessionId);
    if (!wanted) {
      const meta = (await this.o.store.getSession(sessionId))?.meta as { tags?: unknown } | null | undefined;
      wanted = Array.isArray(meta?.tags) ? (meta.tags as unknown[]).map(String) : [];
      // Bounded: candidates that stay unclaimable (tags this worker lacks) are few; the rest are
      // forgotten at their release, and a full map starts over rather than growing for ever.
      if (this.wantedTags.size >= 10_000) this.wantedTags.clear();
      this.wantedTags.set(sessionId, wanted);
    }
    return wanted.every((t) => this.o.tags.includes(t));
  }

  /** A session with no unfinished task is done here: released so status shows no owner. */
  private async releaseFinished(): Promise<void> {
    const owned = this.o.kernel.ownedSessions().map((o) => o.sessionId);
    if (owned.length === 0) return;
    // One read for every owned session (it was one per session, each round: 8 round trips before a freed slot was refilled).
    const open = new Set((await this.o.store.listTasks({ sessionIds: owned, statuses: ['pending', 'running', 'waiting', 'sleeping', 'completing'] })).map((t) => t.sessionId));
    const done = owned.filter((sessionId) => !open.has(sessionId));
    for (const sessionId of done) this.wantedTags.delete(sessionId);
    // Together: each release is a flushed write, and the slots they free wait for the last of them.
    await Promise.all(done.map((sessionId) => this.o.kernel.release(sessionId)));
    for (const sessionId of done) await this.o.onReleased?.(sessionId).catch((err: unknown) => this.o.logger.warn({ err, sessionId }, 'clean-up after a run end failed; the next sweep does it'));
  }
}

function shuffled<T>(items: T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}
