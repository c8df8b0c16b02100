import { z } from 'zod';
import { EnvironmentSchema } from '../../environment';
import { PlanSchema } from './plan-schema';

/** What a plan run keeps as its root task's input: the plan and environment as they were at submit time, not as the files are now. */
export const PlanRunInputSchema = z.object({
  planFile: z.string(),
  plan: PlanSchema,
  environment: EnvironmentSchema,
  envFingerprint: z.string(),
  workspaceDir: z.string().nullable(),
  /**
   * Set on a fork: the run and checkpoint it continues from. Its sandbox is leased from that
   * checkpoint's snapshot and verified before any step; the steps before `index` are the parent's
   * history and never run in the fork.
   */
  fork: z
    .object({ runId: z.string(), snapshotId: z.string(), checkpoint: z.string(), index: z.number().int().min(0) })
    .optional(),
});
export type PlanRunInput = z.infer<typeof PlanRunInputSchema>;

export const PlanRootCheckpointSchema = z.object({
  /** The next step to run. */
  index: z.number().int().min(0),
  /** Bumped by each reconcile-restore, so re-run steps get new effect ids. */
  generation: z.number().int().min(0),
  /** Milliseconds the run's finished step commands took in all: what `resources.runBudgetS` counts (absent: none yet). */
  usedMs: z.number().min(0).optional(),
  /** Why the run waits for an operator, when it does. */
  pending: z
    .object({
      kind: z.enum(['interrupted', 'reconcile']),
      index: z.number().int(),
      reason: z.string(),
      /** Ids of the missing or altered artifacts the run waits about; a decision waives them. */
      artifacts: z.array(z.string()).optional(),
    })
    .optional(),
  /**
   * The operator's decision, as delivered: whether the uncertain effects happened (`effects`,
   * already settled in the delivering commit) and which sandbox state to continue from
   * (`snapshotId`, else the current sandbox). `action` is the older form (accept = keep the
   * sandbox, restore = restore `snapshotId`).
   */
  reconcile: z
    .object({ action: z.enum(['accept', 'restore']).optional(), effects: z.enum(['accepted', 'rejected']).optional(), snapshotId: z.string().optional() })
    .optional(),
});
export type PlanRootCheckpoint = z.infer<typeof PlanRootCheckpointSchema>;

export const StepInputSchema = z.object({
  index: z.number().int().min(0),
  generation: z.number().int().min(0),
  /** What is left of the run's budget (`resources.runBudgetS`) when the step was spawned; absent in steps of older hosts. */
  budgetMs: z.number().optional(),
});
export type StepInput = z.infer<typeof StepInputSchema>;

/** What a finished step reports (also kept as the step task's result). */
export const StepResultSchema = z.object({
  step: z.string(),
  exitCode: z.number().int(),
  timedOut: z.boolean(),
  oomKilled: z.boolean(),
  /** The sandbox's writable layer went over `diskMb` (absent in results written before it was recorded). */
  diskExceeded: z.boolean().optional(),
  /** A fork was refused by the pids limit. */
  pidsLimited: z.boolean().optional(),
  durationMs: z.number(),
  snapshotId: z.string().nullable(),
  stdoutTail: z.string(),
  stderrTail: z.string(),
  /** The whole output's digest (see step-exec.ts); absent in results written before it was kept. */
  outputDigest: z.string().optional(),
  reconcile: z.string().optional(),
  /** A `never` step not executed again: the id of its effect confirmed in an earlier generation. */
  alreadyDone: z.string().optional(),
  /** The sandbox went back to an older snapshot: the run continues from this step index (in a new generation). */
  rewind: z.number().int().min(0).optional(),
  /** How many artifacts the step committed. */
  artifacts: z.number().int().min(0).optional(),
});
export type StepResult = z.infer<typeof StepResultSchema>;

/** What a step task commits: its step's result, or (ended `interrupted`) only that it was cut off. */
export const StepTaskResultSchema = z.union([
  StepResultSchema,
  // `earlier`: what became of the command an earlier host started for it (stopped, or already ended), said before it is judged.
  z.object({ step: z.string(), interrupted: z.literal(true), earlier: z.string().optional() }),
]);

/** What the plan root's `complete` commits: every terminal step's result, in step order. */
export const PlanResultSchema = z.object({ steps: z.array(StepTaskResultSchema.nullable()) });
export type PlanResult = z.infer<typeof PlanResultSchema>;
export type StepTaskResult = z.infer<typeof StepTaskResultSchema>;

export type PlanProgress =
  | { type: 'step-start'; runId: string; index: number; step: string; command: string }
  | { type: 'step-output'; runId: string; index: number; step: string; stream: 'stdout' | 'stderr'; text: string }
  | { type: 'step-end'; runId: string; index: number; step: string; exitCode: number; durationMs: number; snapshotId: string | null }
  | { type: 'sandbox'; runId: string; message: string };
