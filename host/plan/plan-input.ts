import type { Environment } from '../../environment';
import type { Plan } from './plan-schema';

/** What a plan run keeps as its root task's input: the plan and environment as they were at submit time, not as the files are now. */
export interface PlanRunInput {
  planFile: string;
  plan: Plan;
  environment: Environment;
  envFingerprint: string;
  workspaceDir: string | null;
}

export interface PlanRootCheckpoint {
  /** The next step to run. */
  index: number;
  /** Bumped by each reconcile-restore, so re-run steps get new effect ids. */
  generation: number;
  /** Why the run waits for an operator, when it does. */
  pending?: { kind: 'interrupted' | 'reconcile'; index: number; reason: string };
  /**
   * The operator's decision, as delivered: whether the uncertain effects happened (`effects`,
   * already settled in the delivering commit) and which sandbox state to continue from
   * (`snapshotId`, else the current sandbox). `action` is the older form (accept = keep the
   * sandbox, restore = restore `snapshotId`).
   */
  reconcile?: { action?: 'accept' | 'restore'; effects?: 'accepted' | 'rejected'; snapshotId?: string };
}

export interface StepInput {
  index: number;
  generation: number;
}

/** What a finished step reports (also kept as the step task's result). */
export interface StepResult {
  step: string;
  exitCode: number;
  timedOut: boolean;
  oomKilled: boolean;
  /** The sandbox's writable layer went over `diskMb` (absent in results written before it was recorded). */
  diskExceeded?: boolean;
  /** A fork was refused by the pids limit. */
  pidsLimited?: boolean;
  durationMs: number;
  snapshotId: string | null;
  stdoutTail: string;
  stderrTail: string;
  reconcile?: string;
  /** A `never` step not executed again: the id of its effect confirmed in an earlier generation. */
  alreadyDone?: string;
  /** The sandbox went back to an older snapshot: the run continues from this step index (in a new generation). */
  rewind?: number;
}

export type PlanProgress =
  | { type: 'step-start'; runId: string; index: number; step: string; command: string }
  | { type: 'step-output'; runId: string; index: number; step: string; stream: 'stdout' | 'stderr'; text: string }
  | { type: 'step-end'; runId: string; index: number; step: string; exitCode: number; durationMs: number; snapshotId: string | null }
  | { type: 'sandbox'; runId: string; message: string };
