import type { CommitInput, Store } from '../store';

/** Per-session ownership of a kernel (issue 15): it drives only sessions it claimed, each under its own epoch. */
export interface SessionOwnershipOptions {
  /** How long a claim holds without a renewal (database clock). Renewed at every heartbeat. */
  leaseTtlMs: number;
}

/** A session this kernel owned and lost: another host claimed it (its lease ran out, or an operator took it over). */
export interface SessionLost {
  sessionId: string;
  epoch: number;
  holder: string | null;
  pid: number | null;
}

const scope = (sessionId: string) => `session:${sessionId}`;

/**
 * The sessions a kernel owns, with the epoch of each claim. Every commit of an owned session is
 * fenced with its epoch (the store refuses it in the same transaction when the epoch moved on); a
 * commit of a session it does not own is refused here, before the store, unless it creates the
 * session (a submission: nobody can own a session that does not exist yet).
 */
export class SessionOwners {
  private readonly owned = new Map<string, number>();

  constructor(
    private readonly store: Store,
    readonly options: SessionOwnershipOptions,
  ) {}

  has(sessionId: string): boolean {
    return this.owned.has(sessionId);
  }

  epochOf(sessionId: string): number | undefined {
    return this.owned.get(sessionId);
  }

  add(sessionId: string, epoch: number): void {
    this.owned.set(sessionId, epoch);
  }

  /** Forgets the session; true when it was owned with that epoch (so a loss is reported once). */
  remove(sessionId: string, epoch?: number): boolean {
    if (!this.owned.has(sessionId) || (epoch !== undefined && this.owned.get(sessionId) !== epoch)) return false;
    return this.owned.delete(sessionId);
  }

  list(): Array<{ sessionId: string; epoch: number }> {
    return [...this.owned].map(([sessionId, epoch]) => ({ sessionId, epoch }));
  }

  /** The fence of a commit: the session's epoch, none for a submission, or null (not owned: never written). */
  fence(input: CommitInput): { scope: string; epoch: number } | undefined | null {
    const epoch = this.owned.get(input.sessionId);
    if (epoch !== undefined) return { scope: scope(input.sessionId), epoch };
    return input.createSession ? undefined : null;
  }

  /** Renews every owned lease; returns the sessions whose epoch moved on (lost). A busy store is no loss. */
  async renewAll(onError: (err: unknown) => void): Promise<Array<{ sessionId: string; epoch: number }>> {
    const lost: Array<{ sessionId: string; epoch: number }> = [];
    for (const { sessionId, epoch } of this.list()) {
      try {
        if (!(await this.store.renewSession(sessionId, epoch, this.options.leaseTtlMs))) lost.push({ sessionId, epoch });
      } catch (err) {
        onError(err);
      }
    }
    return lost;
  }

  /** Who holds the session now, for the loss report. */
  async describeLoss(sessionId: string, epoch: number): Promise<SessionLost> {
    const now = await this.store.getSessionOwner(sessionId).catch(() => undefined);
    return { sessionId, epoch, holder: now?.holder ?? null, pid: now?.pid ?? null };
  }

  /** Sessions other hosts own live right now (a store-wide kernel leaves them alone). */
  static async liveElsewhere(store: Store): Promise<Set<string>> {
    const now = await store.databaseNow();
    return new Set((await store.listSessionOwners()).filter((o) => o.stoppedAt === null && o.leaseUntil >= now).map((o) => o.sessionId));
  }
}
