import { z } from 'zod';
import { COST_METERS, EFFECT_STATUSES, EffectAttemptSchema, JsonSchema, REPLAY_POLICIES, RUN_STATES, TASK_OUTCOMES, TASK_STATUSES, TaskErrorSchema, WaitSpecSchema } from '../model';

/** The `format` of every run record; with `schemaVersion` it says how to read the rest. */
export const RECORD_FORMAT = 'berth.run-record';
/** The schema versions this build reads. A record of any other version is refused on import. */
export const RECORD_SCHEMA_VERSION = 1;

const RunState = z.enum(RUN_STATES);
const Versions = z.strictObject({ kernel: z.string().optional(), envFingerprint: z.string().optional(), imageDigest: z.string().optional() });

/**
 * A section whose data does not exist for this run (an agent run declares no artifacts, a run not
 * forked has no origin). Marked explicitly, so a reader never mistakes "not recorded" for "none happened".
 */
export const NotRecordedSchema = z.strictObject({ recorded: z.literal(false), note: z.string() });

/** A large value kept out of the record: its sha256 over the canonical JSON and its size. */
export const OmittedSchema = z.strictObject({ omitted: z.literal(true), digest: z.string(), bytes: z.number().int() });

export const TransitionSchema = z.strictObject({
  n: z.number().int(),
  at: z.number(),
  actor: z.string(),
  from: RunState.nullable(),
  to: RunState,
  reason: z.string(),
  versions: Versions,
  commitSeq: z.number().int(),
});

export const TaskRecordSchema = z.strictObject({
  id: z.string(),
  parentId: z.string().nullable(),
  kind: z.string(),
  kindVersion: z.number().int(),
  status: z.enum(TASK_STATUSES),
  phase: z.string(),
  checkpoint: JsonSchema,
  input: JsonSchema,
  attempts: z.number().int(),
  restarts: z.number().int(),
  wait: WaitSpecSchema.nullable(),
  wakeAt: z.number().nullable(),
  outcome: z.enum(TASK_OUTCOMES).nullable(),
  result: JsonSchema,
  error: TaskErrorSchema.nullable(),
  cancelRequested: z.boolean(),
  blockedReason: z.string().nullable(),
  version: z.number().int(),
  createdAt: z.number(),
  updatedAt: z.number(),
});

export const EffectRecordSchema = z.strictObject({
  id: z.string().describe('the idempotency key: store-wide, one logical action'),
  taskId: z.string().nullable(),
  kind: z.string(),
  intent: JsonSchema,
  replay: z.enum(REPLAY_POLICIES),
  status: z.enum(EFFECT_STATUSES),
  attempts: z.number().int(),
  /** Every attempt (id, run, task, owner epoch, start, end, outcome, how it was settled and by whom); absent in records made before attempts were kept. */
  attemptLog: z.array(EffectAttemptSchema).default([]),
  /** The run that owns it now; another run's when a later run attempted it afresh (this run's attempts stay in `attemptLog`). */
  runId: z.string().nullable().optional(),
  receipt: JsonSchema,
  error: JsonSchema,
  createdAt: z.number(),
  updatedAt: z.number(),
  /** How the outside world's answer is or can be learnt: the action's reply, a status query (`verify`), an operator's word, or none. */
  reconciliation: z.enum(['receipt', 'verify_query', 'operator_decision', 'pending', 'none']),
});

export const EntryRecordSchema = z.strictObject({
  id: z.string(),
  seq: z.number().int(),
  conversationId: z.string().nullable(),
  taskId: z.string().nullable(),
  kind: z.string(),
  body: z.union([OmittedSchema, JsonSchema]),
  commitSeq: z.number().int(),
  at: z.number(),
});

export const DocumentRecordSchema = z.strictObject({
  id: z.string(),
  runId: z.string().nullable(),
  type: z.string(),
  version: z.number().int(),
  baselineVersion: z.number().int(),
  baseline: JsonSchema,
  ops: z.array(z.strictObject({ version: z.number().int(), op: JsonSchema })),
});

export const SnapshotRecordSchema = z.strictObject({
  id: z.string(),
  /** The run that took it; an agent session's snapshot may come from an earlier run of the session. */
  runId: z.string().nullable(),
  taskId: z.string().nullable(),
  leaseId: z.string(),
  imageId: z.string(),
  workspaceDigest: z.string(),
  sizeBytes: z.number(),
  checkpoint: z.string(),
  parentId: z.string().nullable(),
  commitSeq: z.number().int(),
  createdAt: z.number(),
  prunedAt: z.number().nullable(),
  /** The pushed manifest (`repo@sha256:…`) when the snapshot travels through a registry. */
  registryRef: z.string().nullable().default(null),
  pushedAt: z.number().nullable().default(null),
});

export const LeaseRecordSchema = z.strictObject({
  id: z.string(),
  hostId: z.string(),
  containerId: z.string(),
  imageDigest: z.string(),
  envFingerprint: z.string(),
  createdAt: z.number(),
  expiresAt: z.number(),
  releasedAt: z.number().nullable(),
  runId: z.string().nullable(),
  /** The ownership epoch the sandbox was last held under (raised when a new owner adopted it); absent in records made before epochs were kept. */
  epoch: z.number().nullable().optional(),
});

export const EgressRecordSchema = z.strictObject({
  at: z.number(),
  leaseId: z.string().nullable(),
  method: z.string(),
  target: z.string(),
  decision: z.enum(['allow', 'deny']),
  reason: z.string(),
  bytesOut: z.number(),
  bytesIn: z.number(),
  count: z.number().int(),
  /** An allowed request's id: recorded at its start, completed at its end; `endedAt` null: it was in flight when last recorded (its host died). */
  id: z.string().nullable().optional(),
  endedAt: z.number().nullable().optional(),
});

export const ApprovalRecordSchema = z.strictObject({
  approvalId: z.string(),
  toolCallId: z.string(),
  tool: z.string(),
  scopeDigest: z.string(),
  expiresAt: z.number().nullable(),
  requestedAt: z.number(),
  /** `cancelled`: closed by a cancel of the run while it waited (`approver` is who cancelled). */
  decision: z.enum(['pending', 'approved', 'denied', 'expired', 'cancelled']),
  approver: z.string().nullable(),
  decidedAt: z.number().nullable(),
});

export const UnresolvedSchema = z.strictObject({
  kind: z.enum(['effect', 'approval', 'task', 'run']),
  id: z.string(),
  status: z.string(),
  why: z.string(),
});

/** What judges the run: `manual` (an operator, `berth accept`/`reject`) or the plan's acceptance command. */
export const AcceptanceRuleSchema = z.union([
  z.strictObject({ kind: z.literal('manual') }),
  z.strictObject({ kind: z.literal('command'), command: z.string(), replay: z.enum(['safe', 'never']), timeoutS: z.number().nullable() }),
]);

/** One acceptance decision, as committed (host/acceptance): never a run transition. */
export const AcceptanceDecisionRecordSchema = z.strictObject({
  id: z.string(),
  requestId: z.string(),
  decision: z.enum(['accepted', 'rejected']),
  actor: z.string().describe('`acceptance-command` or `user:NAME`'),
  reason: z.string().nullable(),
  evidence: JsonSchema.describe('for the command: its text, exit code, timeout flag, output digest and the effect that ran it'),
  at: z.number(),
  commitSeq: z.number().int(),
});

/** The run's acceptance, apart from its state: the verdict is the newest decision's (`pending`: completed, not judged; `none`: not completed). */
export const AcceptanceSectionSchema = z.strictObject({
  verdict: z.enum(['none', 'pending', 'accepted', 'rejected']),
  decisions: z.array(AcceptanceDecisionRecordSchema),
});

const TokenCountSchema = z.strictObject({ requests: z.number(), prompt: z.number(), completion: z.number(), cached: z.number() });

/** Measured cost samples as recorded, and the run's cost derived from them and its records at export time (host/cost). */
export const CostSectionSchema = z.strictObject({
  samples: z.array(z.strictObject({ at: z.number(), meter: z.enum(COST_METERS), key: z.string().describe('the model, or the lease'), amount: z.number() })),
  summary: z.strictObject({
    tokens: z.record(z.string(), TokenCountSchema),
    cpuSeconds: z.number(),
    memoryGbSeconds: z.number(),
    execs: z.number(),
    leaseSeconds: z.number(),
    snapshotBytes: z.number(),
    snapshotGbMonths: z.number(),
    approvalWaitSeconds: z.number(),
    recovery: z.strictObject({ stepsRerun: z.number(), restores: z.number() }),
  }),
});

/** Not absolute, no `..` component, no NUL byte (file names may hold any other character, newlines included). */
const ARTIFACT_PATH = /^(?!\/)(?![\s\S]*(?:^|\/)\.\.(?:\/|$))[^\u0000]+$/;

/** A file a plan step declared and the run recorded (every generation; a re-run step's newer one supersedes). */
export const ArtifactRecordSchema = z.strictObject({
  id: z.string(),
  taskId: z.string().nullable(),
  stepIndex: z.number().int(),
  generation: z.number().int(),
  step: z.string(),
  // No Berth writes any other path (globs are checked, copies confined); a record that holds one was
  // made or edited by hand, and `berth artifacts --out` would be asked to write outside its directory.
  path: z
    .string()
    .regex(ARTIFACT_PATH, 'a workspace-relative path with no ".." component (not absolute, no NUL)')
    .describe('workspace-relative, `/`-separated'),
  sizeBytes: z.number(),
  sha256: z.string(),
  snapshotId: z.string().nullable(),
  commitSeq: z.number().int(),
  createdAt: z.number(),
  mode: z.number().int().min(0).max(0o7777).optional().describe('permission bits in the sandbox; absent when not recorded'),
});

/** Who drove the run's session: its owner row at export time and the take-overs its transitions log. */
export const OwnershipSectionSchema = z.strictObject({
  owner: z
    .strictObject({ epoch: z.number().int(), holder: z.string(), pid: z.number().nullable(), takenAt: z.number(), heartbeatAt: z.number(), leaseUntil: z.number(), stoppedAt: z.number().nullable() })
    .nullable()
    .describe('null: no host claimed the session; an imported run keeps the owner its record named, never as a claim of the importing store'),
  takeOvers: z.array(z.strictObject({ n: z.number().int(), at: z.number(), actor: z.string(), commitSeq: z.number().int() })),
});

const KindVersion = z.strictObject({ kind: z.string(), version: z.number().int() });

/**
 * The seed contract's fields beyond the raw collections (issue 27): retry budget and backoff per
 * task kind, timeouts, cancellation grace, attempt ids, retention and deletions, dependency-failure
 * action, versions per transition. Absent in records made before it; `recorded: false` with a
 * reason for what Berth cannot know.
 */
export const ContractFieldsSchema = z.strictObject({
  retry: z.array(z.strictObject({
    kind: z.string(),
    version: z.number().int(),
    maxRetries: z.union([z.number().int(), NotRecordedSchema]).describe('retries of a phase that threw a retryable error'),
    restartLimit: z.union([z.number().int(), NotRecordedSchema]).nullable().describe('restarts after a host loss before the task fails; null: no limit'),
    backoff: z.string(),
  })),
  modelRetry: z.union([z.strictObject({ maxAttempts: z.number().int(), backoffMs: z.number().nullable(), maxBackoffMs: z.number().nullable() }), NotRecordedSchema]),
  timeouts: z.strictObject({
    commandTimeoutS: z.number().nullable(),
    runBudgetS: z.number().nullable(),
    steps: z.array(z.strictObject({ step: z.string(), timeoutS: z.number().nullable() })),
    acceptanceTimeoutS: z.number().nullable(),
    modelTimeoutMs: z.number().nullable(),
  }),
  cancellationGrace: z.union([z.strictObject({ graceMs: z.number() }), NotRecordedSchema]),
  effectAttempts: z.array(z.strictObject({
    effectId: z.string(),
    attempts: z.number().int(),
    attemptIds: z.union([z.array(z.string()), NotRecordedSchema]),
  })),
  retention: z.strictObject({
    rule: z.union([z.string(), NotRecordedSchema]),
    deletions: z.array(z.strictObject({ what: z.enum(['snapshot', 'lease']), id: z.string(), at: z.number() })).describe('snapshots pruned and sandboxes released'),
  }),
  dependencyFailure: z.union([z.array(z.strictObject({ step: z.string(), action: z.enum(['fail_run', 'continue']) })), NotRecordedSchema]),
  transitionVersions: z.array(z.strictObject({ n: z.number().int(), versions: Versions, taskKinds: z.array(KindVersion) })),
});
export type ContractFields = z.infer<typeof ContractFieldsSchema>;

export const RunRecordSchema = z.strictObject({
  format: z.literal(RECORD_FORMAT),
  schemaVersion: z.literal(RECORD_SCHEMA_VERSION),
  /** `sha256:` + hex sha256 of the canonical JSON of this document without this field (see canonical.ts). */
  digest: z.string(),
  exportedAt: z.number(),
  source: z.strictObject({ storeId: z.string(), berth: z.string(), importedFrom: z.string().nullable() }),
  job: z.strictObject({
    requestId: z.string().nullable(),
    submissionId: z.string().nullable(),
    submittedAt: z.number().nullable(),
    submitter: z.string().nullable(),
    objective: JsonSchema.describe('what the run was asked to do: plan name and steps, or the agent task'),
    submission: z.union([OmittedSchema, JsonSchema]),
    acceptanceRule: z.union([AcceptanceRuleSchema, NotRecordedSchema]),
    authorityReference: NotRecordedSchema,
  }),
  run: z.strictObject({
    id: z.string(),
    sessionId: z.string(),
    sessionCreatedAt: z.number(),
    sessionMeta: JsonSchema,
    kind: z.string(),
    state: RunState,
    rootTaskId: z.string().nullable(),
    parentRunId: z.string().nullable(),
    /** The run and checkpoint this run was forked from (its history before `index` is that run's). */
    forkedFrom: z.union([z.strictObject({ runId: z.string(), snapshotId: z.string(), checkpoint: z.string(), index: z.number().int() }), NotRecordedSchema]),
    transitionCount: z.number().int(),
    versions: Versions,
    handlerKinds: z.array(z.strictObject({ kind: z.string(), version: z.number().int() })),
    models: z.array(z.string()),
    promptDigest: z.string().nullable(),
    createdAt: z.number(),
    updatedAt: z.number(),
  }),
  transitions: z.array(TransitionSchema),
  commits: z.array(z.strictObject({ seq: z.number().int(), at: z.number(), label: z.string(), actor: z.string() })),
  checkpoint: z.strictObject({
    store: z.string(),
    lastCommittedTransition: z.number().int().nullable(),
    lastCommitSeq: z.number().int(),
    resumeRule: z.string(),
  }),
  retryAndTimeout: z.strictObject({
    commandTimeoutS: z.number().nullable(),
    runBudgetS: z.number().nullable(),
    leaseTtlS: z.number().nullable(),
    stepReplay: z.array(z.strictObject({ step: z.string(), replay: z.string() })),
    taskAttempts: z.array(z.strictObject({ taskId: z.string(), attempts: z.number().int(), restarts: z.number().int() })),
  }),
  tasks: z.array(TaskRecordSchema),
  effects: z.array(EffectRecordSchema),
  approvals: z.array(ApprovalRecordSchema),
  isolation: z.strictObject({
    engine: z.literal('docker'),
    environment: z.union([JsonSchema, NotRecordedSchema]).describe('the manifest as submitted, secret sources removed'),
    network: z.strictObject({ mode: z.string().nullable(), allow: z.array(z.string()) }),
    secrets: z.array(z.strictObject({ name: z.string(), to: z.array(z.string()) })).describe('names and grants only; never values'),
    limits: JsonSchema,
    leases: z.array(LeaseRecordSchema),
    snapshots: z.array(SnapshotRecordSchema),
  }),
  documents: z.array(DocumentRecordSchema),
  entries: z.array(EntryRecordSchema),
  egress: z.array(EgressRecordSchema),
  recovery: z.strictObject({
    restarts: z.number().int(),
    interruptedTasks: z.array(z.string()),
    reconciliations: z.array(TransitionSchema),
    cancellation: JsonSchema.describe('per cancelled task: whether its effect happened before, after or is unknown'),
    completionEvidence: JsonSchema,
  }),
  acceptance: AcceptanceSectionSchema,
  cost: CostSectionSchema,
  artifacts: z.union([z.array(ArtifactRecordSchema), NotRecordedSchema]),
  ownership: OwnershipSectionSchema,
  unresolved: z.array(UnresolvedSchema),
  contract: ContractFieldsSchema.optional(),
});

/** One exported run: the Agent Run Contract's fields over Berth's records. */
export type RunRecord = z.infer<typeof RunRecordSchema>;
