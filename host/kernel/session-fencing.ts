import type { Logger } from 'pino';
import type { ClaimResult, CommitInput, Store } from '../store';
import type { Fence, Fencing } from './fencing';
import { SessionOwners, type SessionLost, type SessionOwnershipOptions } from './session-owners';

/**
 * How every kernel holds its right to commit (one ownership model for `berth run`, `resume`,
 * `reconcile`, `chat`, the web view's actions and `berth worker`): it drives only the sessions it
 * claimed, each fenced by its own epoch and kept by a lease on the database clock. A session lost
 * to another host, or whose lease ran out before a renewal, has its phases aborted at once and is
 * reported once; the kernel's other sessions go on.
 */
export class SessionFencing implements Fencing {
  private readonly owners: SessionOwners;
  private readonly listeners = new Set<(l: SessionLost) => void>();

  constructor(
    private readonly store: Store,
    private readonly logger: Logger,
    options: SessionOwnershipOptions,
    holder: { hostId: string; pid: number },
    /** Stops every phase of the session at once (their signals abort their execs). */
    private readonly abortSession: (sessionId: string, why: string) => Promise<void>,
  ) {
    this.owners = new SessionOwners(store, options, holder);
  }

  /** Holds the session from now on under `epoch` (a claim the caller took). */
  add(sessionId: string, epoch: number): void {
    this.owners.add(sessionId, epoch);
  }

  /** Claims the session (see {@link SessionOwners.claim}); held from now on when it succeeds. */
  claim(sessionId: string, opts: { takeOver?: boolean } = {}): Promise<ClaimResult> {
    return this.owners.claim(sessionId, opts);
  }

  /** Sessions with work that no live owner drives (see {@link SessionOwners.available}). */
  available(limit: number, opts: { orphaned?: boolean } = {}): Promise<string[]> {
    return this.owners.available(limit, opts);
  }

  list(): Array<{ sessionId: string; epoch: number }> {
    return this.owners.list();
  }

  epochOf(sessionId: string): number | undefined {
    return this.owners.epochOf(sessionId);
  }

  fence(input: CommitInput): Fence | undefined | null {
    return this.owners.fence(input);
  }

  fenceRefused(sessionId: string, fence: Fence | undefined): void {
    if (fence) void this.lose(sessionId, fence.epoch);
  }

  holds(sessionId: string): boolean {
    return this.owners.has(sessionId);
  }

  stillHeld(sessionId: string): () => boolean {
    const epoch = this.owners.epochOf(sessionId);
    return () => this.owners.epochOf(sessionId) === epoch;
  }

  async drives(): Promise<(sessionId: string) => boolean> {
    return (sessionId) => this.owners.has(sessionId);
  }

  async heartbeat(): Promise<void> {
    const lost = await this.owners.renewAll((err) => this.logger.warn({ err }, 'could not renew a session lease; trying again'));
    for (const l of lost) await this.lose(l.sessionId, l.epoch);
  }

  async release(): Promise<void> {
    // Released sessions are claimable at once by another host (no wait for the lease to run out).
    for (const { sessionId, epoch } of this.owners.list()) await this.store.releaseSession(sessionId, epoch).catch(() => false);
  }

  /** Gives one session up cleanly (its run ended): another host may claim it at once. */
  async releaseSession(sessionId: string): Promise<void> {
    const epoch = this.owners.epochOf(sessionId);
    if (epoch === undefined || !this.owners.remove(sessionId, epoch)) return;
    await this.abortSession(sessionId, 'session released');
    // Refused: another host claimed it meanwhile (this one was frozen past its lease). Said as a loss.
    if ((await this.store.releaseSession(sessionId, epoch).catch(() => true)) === false) await this.reportLoss(sessionId, epoch);
  }

  /** Called once per session lost to another host; all work on it has stopped. */
  onLost(listener: (l: SessionLost) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private async lose(sessionId: string, epoch: number): Promise<void> {
    if (!this.owners.remove(sessionId, epoch)) return;
    await this.abortSession(sessionId, 'ownership lost');
    await this.reportLoss(sessionId, epoch);
  }

  private async reportLoss(sessionId: string, epoch: number): Promise<void> {
    const lost = await this.owners.describeLoss(sessionId, epoch);
    this.logger.error({ lost }, lost.why === 'expired' ? 'this host\'s lease on a session ran out before a renewal; stopped all work on it' : 'another host took this session; stopped all work on it');
    for (const l of this.listeners) l(lost);
  }
}
