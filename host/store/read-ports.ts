import type { AcceptanceDecision, CostSample, CostTotal, Run } from '../model';
import type { Page } from './store';

// Reads every store implements; declared with the port (store.ts), not with one implementation.

/** Reads of acceptance decisions, oldest first (the newest is the run's current acceptance). */
export interface AcceptanceReads {
  listAcceptance(filter: { runId?: string }): Promise<AcceptanceDecision[]>;
  findAcceptance(requestId: string): Promise<AcceptanceDecision | undefined>;
}

/** Cost samples: measured resource use, recorded as it happens (not session state, so not a commit). */
export interface CostRecords {
  /**
   * `sync: 'with-next-commit'`: the sample need not be flushed on its own; it is durable with the
   * store's next durable commit (and a process crash never loses it). For a sample a commit
   * follows at once (a tool's result). A store may always flush (PostgreSQL does).
   */
  recordCost(sample: CostSample, opts?: { sync?: 'now' | 'with-next-commit' }): Promise<void>;
  /** Every meter summed per run and key (model or lease); `runIds` limits it to those runs. */
  sumCost(filter?: { runIds?: string[] }): Promise<CostTotal[]>;
  /**
   * One run's samples as recorded, one row per meter, oldest first (for an export of the run's
   * record); `page` reads them page by page (three rows a step: a long run's are thousands).
   */
  listCost(filter: { runId: string; page?: Page }): Promise<Array<CostTotal & { at: number }>>;
}

/** The runs forked from a run, found by the parent the submit recorded (`runs.forked_from_run_id`, indexed). */
export interface ForkReads {
  /**
   * The runs forked directly from `runId` (plan forks, and the first run of each session forked
   * from it), in creation order as `listRuns` orders them; imported forks included.
   */
  listForks(runId: string): Promise<Run[]>;
}
