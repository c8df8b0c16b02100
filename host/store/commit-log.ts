import type { Entry } from '../model';

/** One commit in the store-wide order: `seq` orders every commit of every session (SSE event ids). */
export interface LoggedCommit {
  /** Store-wide, strictly increasing in commit order; never reused. */
  seq: number;
  sessionId: string;
  /** The commit's per-session sequence (`commits.seq`). */
  sessionSeq: number;
  at: number;
  label: string;
  actor: string;
}

/**
 * The store-wide commit order, for readers that follow every session at once (`berth serve`'s
 * event stream): a reader that saw up to `seq` N and asks for `afterSeq: N` misses nothing.
 */
export interface CommitLogRecords {
  /** Commits after `afterSeq` in store-wide order, oldest first (optionally one session's only). */
  listCommitLog(filter?: { afterSeq?: number; sessionId?: string; limit?: number }): Promise<LoggedCommit[]>;
  /** The newest store-wide commit sequence (0 when nothing was committed). */
  lastCommitLogSeq(): Promise<number>;
  /** A page of entries newest first (for pages that show the newest and load older on demand). */
  listEntriesNewest(sessionId: string, filter: { runId?: string; beforeSeq?: number; limit: number }): Promise<Entry[]>;
  /**
   * The token counts (`body.usage.promptTokens`, `completionTokens`, `totalTokens`) of one run's
   * entries of `kind`, summed by the store: a long agent run's page showed them by reading every
   * entry of the run at each render.
   */
  sumEntryUsage(sessionId: string, filter: { runId: string; kind: string }): Promise<{ prompt: number; completion: number; total: number }>;
}
