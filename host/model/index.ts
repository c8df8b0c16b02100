export { JsonSchema, plainJson, type Json } from './json';
export {
  RUN_STATES,
  type RunState,
  isLegalRunTransition,
  isFinalRunState,
  OPEN_RUN_STATES,
  assertRunTransition,
  runTransitionEdges,
} from './run-states';
export {
  TASK_STATUSES,
  TASK_OUTCOMES,
  type TaskStatus,
  type TaskOutcome,
  JoinPolicySchema,
  type JoinPolicy,
  WaitSpecSchema,
  type WaitSpec,
  TaskErrorSchema,
  type TaskError,
  type Task,
} from './task';
export {
  EFFECT_STATUSES,
  REPLAY_POLICIES,
  SETTLED_BY,
  ATTEMPT_OUTCOMES,
  EffectAttemptSchema,
  EffectAttemptLogSchema,
  type EffectStatus,
  type ReplayPolicy,
  type SettledBy,
  type AttemptOutcome,
  type EffectAttempt,
  isUnresolvedEffect,
} from './effect';
export type {
  Session,
  Conversation,
  Submission,
  RunVersions,
  Run,
  RunTransition,
  Entry,
  Effect,
  StoredDocument,
  Snapshot,
  CommitRecord,
} from './records';
export { CommandEvidenceSchema, COST_METERS, type AcceptanceDecision, type CommandEvidence, type CostSample, type CostMeter, type CostTotal } from './acceptance';
export type { LeaseRecord, LeaseRecords, SweepRecord } from './lease';
export type { EgressAttempt, EgressAuditRecords } from './egress';
export { TASK_RESTARTED, SANDBOX_VERIFIED, SANDBOX_SWEPT, OWNER_LOST } from './run-entries';
