import type { CommitInput } from '../store';

/** The fence a commit carries: the store refuses it in the same transaction once `epoch` is no longer current for `scope`. */
export interface Fence {
  scope: string;
  epoch: number;
}

/**
 * What a kernel's right to commit looks like to its scheduler (one claim per session, see
 * {@link SessionFencing}): the scheduler asks it which sessions to drive and how to fence each
 * commit, and tells it when the store refused one.
 */
export interface Fencing {
  /** The fence of a commit; undefined: written unfenced (a submission); null: not held, never written. */
  fence(input: CommitInput): Fence | undefined | null;
  /** The store refused a commit fenced with `fence`: the right behind it is lost. */
  fenceRefused(sessionId: string, fence: Fence | undefined): void;
  /** Whether this kernel holds the right to commit for the session now. */
  holds(sessionId: string): boolean;
  /**
   * A check that stays true while the hold on the session taken as of now lasts (a phase of a
   * session lost meanwhile commits nothing).
   */
  stillHeld(sessionId: string): () => boolean;
  /** The sessions held now, with their epochs (what a poll re-reads). */
  list(): Array<{ sessionId: string; epoch: number }>;
  /** Which sessions the scheduler drives at this poll; rejects when the store cannot say now. */
  drives(): Promise<(sessionId: string) => boolean>;
  /** Renews the right (and so learns it was lost). A busy store is no loss. */
  heartbeat(): Promise<void>;
  /** A clean stop gives the right up, so another host may take it at once. */
  release(): Promise<void>;
}
