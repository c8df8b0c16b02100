import type { ClaimResult, CommitInput, SessionOwner, Store } from '../store';
import { processAlive } from '../support/process-alive';

/** How a kernel owns the sessions it drives (DESIGN.md "More than one host": one model for every host). */
export interface SessionOwnershipOptions {
  /** How long a claim holds without a renewal (database clock). Renewed at every heartbeat. Default 30 s. */
  leaseTtlMs: number;
}

export const DEFAULT_OWNERSHIP: SessionOwnershipOptions = { leaseTtlMs: 30_000 };

/** A session this kernel owned and lost: another host claimed it, or its lease ran out before a renewal. */
export interface SessionLost {
  sessionId: string;
  epoch: number;
  holder: string | null;
  pid: number | null;
  /** `taken`: another host (or an operator) holds it now; `expired`: no renewal reached the store in time. */
  why: 'taken' | 'expired' | 'released';
  /** With `expired`: why the last renewal before it failed (a store on a full disk, unreachable), when one did. */
  renewError?: string;
}

export const sessionScope = (sessionId: string) => `session:${sessionId}`;

/**
 * Whether a session's owner can no longer act: it released the session, its lease ran out on the
 * database clock, or it is a process of this machine (same host id) that no longer exists. The
 * last one lets a host restarted after a SIGKILL continue at once instead of after the TTL; a
 * wrong guess (another machine configured with the same host id) is still safe, because the claim
 * bumps the epoch and the live owner's next commit is refused.
 */
export function ownerGone(owner: SessionOwner, now: number, localHostId: string, pidAlive: (pid: number) => boolean = processAlive): boolean {
  if (owner.stoppedAt !== null || owner.leaseUntil < now) return true;
  return owner.holder === localHostId && owner.pid !== null && owner.pid !== process.pid && !pidAlive(owner.pid);
}

/**
 * The sessions a kernel owns, with the epoch of each claim. Every commit of an owned session is
 * fenced with its epoch (the store refuses it in the same transaction when the epoch moved on or
 * the lease ran out); a commit of a session it does not own is refused here, before the store,
 * unless it creates the session (a submission: nobody can own a session that does not exist yet).
 */
export class SessionOwners {
  private readonly owned = new Map<string, number>();
  /** The failure of each session's last renewal, while the next has not succeeded: the reason a lease then ran out. */
  private readonly renewErrors = new Map<string, string>();

  constructor(
    private readonly store: Store,
    readonly options: SessionOwnershipOptions,
    private readonly holder: { hostId: string; pid: number },
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
    if (epoch !== undefined) return { scope: sessionScope(input.sessionId), epoch };
    return input.createSession ? undefined : null;
  }

  /**
   * Claims the session for this host: refused while a live owner holds it, unless `takeOver` (an
   * operator) or the owner is gone ({@link ownerGone}). Claiming bumps the epoch.
   */
  async claim(sessionId: string, opts: { takeOver?: boolean } = {}): Promise<ClaimResult> {
    const takeOver = opts.takeOver ?? false;
    let claim = await this.store.claimSession(sessionId, this.holder, this.options.leaseTtlMs, { takeOver });
    // The store itself lets a released or lapsed claim go; what it cannot judge is a dead process
    // of this machine, whose live-looking claim it refused: taken over then (one more claim only
    // in that rare case, instead of two reads before every claim).
    if (!claim.ok && !takeOver && ownerGone(claim.owner, claim.now, this.holder.hostId)) {
      claim = await this.store.claimSession(sessionId, this.holder, this.options.leaseTtlMs, { takeOver: true });
    }
    if (claim.ok) this.owned.set(sessionId, claim.epoch);
    return claim;
  }

  /**
   * Sessions with unfinished work that nobody can drive now: no owner, a released or expired claim,
   * or a dead process of this machine (`orphaned`: only the last two, whose owner never released
   * them). Skips imported runs' sessions, which are records, not work.
   */
  async available(limit: number, opts: { orphaned?: boolean } = {}): Promise<string[]> {
    // The three reads asked together: one after another they were three round trips on the path of
    // every worker round (a freed slot waits for them), on a store that answers each in 2-5 ms.
    const [claimable, liveHere, importedRuns] = await Promise.all([
      this.store.claimableSessions(limit, opts),
      this.store.listSessionOwners({ liveHeldBy: this.holder.hostId }),
      this.store.listImportedRuns(),
    ]);
    const out = new Set(claimable);
    // Live claims of this machine's host id only (the store judges live on its clock): those whose process is gone.
    const dead = liveHere.filter((o) => !this.owned.has(o.sessionId) && o.pid !== null && o.pid !== process.pid && !processAlive(o.pid));
    if (dead.length > 0) {
      const open = new Set((await this.store.listTasks({ sessionIds: dead.map((o) => o.sessionId), statuses: ['pending', 'running', 'waiting', 'sleeping', 'completing'] })).map((t) => t.sessionId));
      for (const o of dead) if (open.has(o.sessionId)) out.add(o.sessionId);
    }
    for (const id of this.owned.keys()) out.delete(id);
    if (out.size === 0) return [];
    const imported = new Set(importedRuns.map((r) => r.sessionId));
    return [...out].filter((s) => !imported.has(s));
  }

  /** Renews every owned lease; returns the sessions whose claim no longer holds. A busy store is no loss. */
  async renewAll(onError: (err: unknown) => void): Promise<Array<{ sessionId: string; epoch: number }>> {
    const lost: Array<{ sessionId: string; epoch: number }> = [];
    for (const { sessionId, epoch } of this.list()) {
      try {
        // Refused: the lease ran out (or was taken); a failure before it stays its reason.
        if (!(await this.store.renewSession(sessionId, epoch, this.options.leaseTtlMs))) lost.push({ sessionId, epoch });
        else this.renewErrors.delete(sessionId);
      } catch (err) {
        const code = (err as { code?: unknown }).code;
        this.renewErrors.set(sessionId, err instanceof Error ? `${typeof code === 'string' ? `${code}: ` : ''}${err.message}` : String(err));
        onError(err);
      }
    }
    return lost;
  }

  /** Who holds the session now, for the loss report. */
  async describeLoss(sessionId: string, epoch: number): Promise<SessionLost> {
    const now = await this.store.getSessionOwner(sessionId).catch(() => undefined);
    const why = !now || now.epoch !== epoch ? 'taken' : now.stoppedAt !== null ? 'released' : 'expired';
    const renewError = why === 'expired' ? this.renewErrors.get(sessionId) : undefined;
    this.renewErrors.delete(sessionId);
    return { sessionId, epoch, holder: now?.holder ?? null, pid: now?.pid ?? null, why, ...(renewError ? { renewError } : {}) };
  }
}
