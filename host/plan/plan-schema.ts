import { z } from 'zod';
import { globProblem } from '../artifacts/glob';

const STEP_NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;

export const PlanStepSchema = z.strictObject({
  name: z.string().regex(STEP_NAME, 'a step name: lowercase letters, digits, ".", "_" or "-", starting with a letter or digit'),
  /** Run with `sh -c` in the workspace, as the workspace owner. */
  run: z.string().min(1),
  /**
   * `safe`: after a crash mid-step, the sandbox is restored to the last snapshot and the step runs again.
   * `never`: a step caught mid-run is recorded as interrupted and never re-run; the run waits for reconciliation.
   */
  replay: z.enum(['safe', 'never']).default('safe'),
  /** Per-step timeout; default: the environment's `resources.commandTimeoutS`. */
  timeoutS: z.number().int().positive().optional(),
  env: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name'), z.string()).default({}),
  /** Names of the environment's secrets this step may see; each must list this step in its `to`. */
  secrets: z.array(z.string()).default([]),
  /** A non-zero exit does not stop the plan. */
  allowFailure: z.boolean().default(false),
  /**
   * Keep what the step leaves running in the background (a service later steps use). By default
   * every process the step started is killed when it ends, so nothing carries into the next step.
   */
  keepProcesses: z.boolean().default(false),
  /**
   * Workspace-relative globs (`*`, `?`, `[…]`, `**`) of files to keep: after the step succeeds they
   * are copied out into the artifact store and committed (path, size, sha256) with its checkpoint.
   */
  artifacts: z
    .array(
      z.string().superRefine((g, ctx) => {
        const why = globProblem(g);
        // Worded as the expectation: the issue formatter adds "found VALUE" itself.
        if (why) ctx.addIssue({ code: 'custom', message: `a relative glob inside the workspace (this one has ${why})` });
      }),
    )
    .default([]),
});

/** Per step: how many files and megabytes its artifacts may hold together. */
export const ArtifactLimitsSchema = z.strictObject({
  files: z.number().int().positive().default(1000),
  mb: z.number().positive().default(1024),
});

/**
 * How a completed run is judged. `manual`: an operator says (`berth accept` / `berth reject`).
 * `command`: run in the sandbox after the last step, as one more step (same snapshot, crash and
 * replay rules; `safe` by nature unless declared `never`); exit 0 accepts, anything else rejects,
 * and its exit code and output digest are the evidence. Either way the run stays `completed`.
 */
export const PlanAcceptanceSchema = z.union([
  z.literal('manual'),
  z.strictObject({
    command: z.string().min(1),
    replay: z.enum(['safe', 'never']).default('safe'),
    timeoutS: z.number().int().positive().optional(),
  }),
]);
export type PlanAcceptance = z.infer<typeof PlanAcceptanceSchema>;

/** The name the acceptance command runs under, as a step (progress, snapshot checkpoint, logs). */
export const ACCEPTANCE_STEP = 'acceptance';

/**
 * A build/test plan: which environment, what to upload as the workspace, and the ordered steps.
 * Paths are relative to the plan file.
 */
export const PlanSchema = z
  .strictObject({
    name: z.string().min(1).max(100).optional(),
    environment: z.string().min(1),
    workspace: z.string().min(1).optional(),
    steps: z.array(PlanStepSchema).min(1),
    /** Default `manual`. */
    acceptance: PlanAcceptanceSchema.optional(),
    artifactLimits: ArtifactLimitsSchema.default({ files: 1000, mb: 1024 }),
  })
  .superRefine((plan, ctx) => {
    const seen = new Set<string>();
    plan.steps.forEach((s, i) => {
      if (seen.has(s.name)) ctx.addIssue({ code: 'custom', path: ['steps', i, 'name'], message: `a name not used by an earlier step ("${s.name}" is)` });
      seen.add(s.name);
    });
  });

export type PlanStep = z.infer<typeof PlanStepSchema>;
export type Plan = z.infer<typeof PlanSchema>;

/** The steps a run executes: the plan's, then its acceptance command (when it has one) as one more step. */
export function runSteps(plan: Plan): PlanStep[] {
  const a = plan.acceptance;
  if (!a || a === 'manual') return plan.steps;
  return [...plan.steps, { name: ACCEPTANCE_STEP, run: a.command, replay: a.replay, timeoutS: a.timeoutS, env: {}, secrets: [], allowFailure: false, keepProcesses: false, artifacts: [] }];
}

/** True for the index of the acceptance command's step. */
export const isAcceptanceStep = (plan: Plan, index: number): boolean => index === plan.steps.length && typeof plan.acceptance === 'object';
