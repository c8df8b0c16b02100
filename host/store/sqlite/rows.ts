import {
  EFFECT_STATUSES,
  EffectAttemptLogSchema,
  REPLAY_POLICIES,
  RUN_STATES,
  TASK_OUTCOMES,
  TASK_STATUSES,
  TaskErrorSchema,
  WaitSpecSchema,
  type Effect,
  type Entry,
  type Run,
  type RunTransition,
  type Session,
  type Snapshot,
  type StoredDocument,
  type Submission,
  type Task,
  type Json,
} from '../../model';
import { decodeJson, RunVersionsSchema, storedRow, storedRowInvalid } from '../stored-json';

/**
 * Row-to-model mappers of both stores (PostgreSQL rows have the same column names and encodings).
 * Every JSON column and every status is decoded here, at read time: a stored value this build
 * cannot read is a `store_row_invalid` error naming the table, the row and the column, never a
 * wrongly typed object further in.
 */
export const json = (value: unknown): string => JSON.stringify(value ?? null);

export type Row = Record<string, unknown>;

const WaitOrNull = WaitSpecSchema.nullable();
const TaskErrorOrNull = TaskErrorSchema.nullable();

export function toTask(r: Row): Task {
  const d = storedRow('tasks', r, String(r.id));
  return lazyInput(d, {
    id: r.id as string,
    sessionId: r.session_id as string,
    runId: (r.run_id as string | null) ?? null,
    parentId: (r.parent_id as string | null) ?? null,
    kind: r.kind as string,
    kindVersion: r.kind_version as number,
    status: d.oneOf('status', TASK_STATUSES),
    phase: r.phase as string,
    checkpoint: d.json('checkpoint_json'),
    input: null,
    attempts: r.attempts as number,
    restarts: r.restarts as number,
    wait: d.shaped('wait_json', WaitOrNull),
    wakeAt: (r.wake_at as number | null) ?? null,
    outcome: d.oneOfOrNull('outcome', TASK_OUTCOMES),
    result: d.json('result_json'),
    error: d.shaped('error_json', TaskErrorOrNull),
    cancelRequested: r.cancel_requested === 1,
    blockedReason: (r.blocked_reason as string | null) ?? null,
    version: r.version as number,
    createdAt: r.created_at as number,
    updatedAt: r.updated_at as number,
  });
}

/**
 * The task's input, decoded when first read: it never changes after the task is created, and a
 * plan root's holds every step of the plan, so decoding it on each commit's answer and each read
 * of the row made every step of a long run cost its length. A plain, enumerable data property once
 * read (or written), so copies, equality and JSON see an ordinary object.
 */
function lazyInput(d: ReturnType<typeof storedRow>, task: Task): Task {
  return Object.defineProperty(task, 'input', {
    enumerable: true,
    configurable: true,
    get(this: Task) {
      const value = d.json('input_json');
      Object.defineProperty(this, 'input', { value, enumerable: true, configurable: true, writable: true });
      return value;
    },
    set(this: Task, value: Json) {
      Object.defineProperty(this, 'input', { value, enumerable: true, configurable: true, writable: true });
    },
  });
}

export function toRun(r: Row): Run {
  const d = storedRow('runs', r, String(r.id));
  return {
    id: r.id as string,
    sessionId: r.session_id as string,
    submissionId: (r.submission_id as string | null) ?? null,
    kind: r.kind as string,
    state: d.oneOf('state', RUN_STATES),
    rootTaskId: (r.root_task_id as string | null) ?? null,
    transitionCount: r.transition_count as number,
    versions: d.shaped('versions_json', RunVersionsSchema),
    createdAt: r.created_at as number,
    updatedAt: r.updated_at as number,
  };
}

export function toRunTransition(r: Row): RunTransition {
  const d = storedRow('run_transitions', r, `${String(r.run_id)}#${String(r.n)}`);
  return {
    runId: r.run_id as string,
    n: r.n as number,
    at: r.at as number,
    actor: r.actor as string,
    from: d.oneOfOrNull('from_state', RUN_STATES),
    to: d.oneOf('to_state', RUN_STATES),
    reason: r.reason as string,
    versions: d.shaped('versions_json', RunVersionsSchema),
    commitSeq: r.commit_seq as number,
  };
}

export function toEntry(r: Row): Entry {
  const d = storedRow('entries', r, String(r.id));
  return {
    id: r.id as string,
    sessionId: r.session_id as string,
    seq: r.seq as number,
    conversationId: (r.conversation_id as string | null) ?? null,
    runId: (r.run_id as string | null) ?? null,
    taskId: (r.task_id as string | null) ?? null,
    kind: r.kind as string,
    body: d.json('body_json'),
    commitSeq: r.commit_seq as number,
    at: r.at as number,
  };
}

export function toEffect(r: Row): Effect {
  const d = storedRow('effects', r, String(r.id));
  return {
    id: r.id as string,
    sessionId: r.session_id as string,
    runId: (r.run_id as string | null) ?? null,
    taskId: (r.task_id as string | null) ?? null,
    kind: r.kind as string,
    intent: d.json('intent_json'),
    replay: d.oneOf('replay', REPLAY_POLICIES),
    status: d.oneOf('status', EFFECT_STATUSES),
    attempts: r.attempts as number,
    attemptLog: r.attempts_json === null || r.attempts_json === undefined ? [] : d.shaped('attempts_json', EffectAttemptLogSchema),
    receipt: d.json('receipt_json'),
    error: d.json('error_json'),
    createdAt: r.created_at as number,
    updatedAt: r.updated_at as number,
  };
}

export function toSubmission(r: Row): Submission {
  const d = storedRow('submissions', r, String(r.id));
  return {
    id: r.id as string,
    sessionId: r.session_id as string,
    requestId: r.request_id as string,
    runId: r.run_id as string,
    input: d.json('input_json'),
    createdAt: r.created_at as number,
  };
}

export function toSnapshot(r: Row): Snapshot {
  return {
    id: r.id as string,
    sessionId: r.session_id as string,
    runId: (r.run_id as string | null) ?? null,
    taskId: (r.task_id as string | null) ?? null,
    leaseId: r.lease_id as string,
    imageId: r.image_id as string,
    workspaceDigest: r.workspace_digest as string,
    sizeBytes: r.size_bytes as number,
    checkpoint: r.checkpoint as string,
    parentId: (r.parent_id as string | null) ?? null,
    commitSeq: r.commit_seq as number,
    createdAt: r.created_at as number,
    prunedAt: (r.pruned_at as number | null) ?? null,
    registryRef: (r.registry_ref as string | null) ?? null,
    pushedAt: (r.pushed_at as number | null) ?? null,
  };
}

/** A document as both stores read it: its row, the baseline state it names, and the ops after it. */
export const toDocument = (r: Row, baselineJson: unknown, ops: Row[]): StoredDocument => {
  const baselineId = `${String(r.id)}@${String(r.baseline_version)}`;
  // The row names a baseline version that every commit writes together with it; none is a damaged store.
  if (baselineJson === undefined) throw storedRowInvalid({ table: 'document_baselines', rowId: baselineId, field: 'state_json' }, 'is missing (the document names this baseline)');
  return {
  id: r.id as string,
  sessionId: r.session_id as string,
  runId: (r.run_id as string | null) ?? null,
  type: r.type as string,
  version: r.version as number,
  baselineVersion: r.baseline_version as number,
  baseline: decodeJson(baselineJson, { table: 'document_baselines', rowId: baselineId, field: 'state_json' }),
  ops: ops.map((o) => ({ version: o.version as number, op: storedRow('document_ops', o, `${String(r.id)}@${String(o.version)}`).json('op_json') })),
  };
};

export const toSession = (r: Row): Session => ({
  id: r.id as string,
  createdAt: r.created_at as number,
  lastSeq: r.last_seq as number,
  meta: storedRow('sessions', r, String(r.id)).json('meta_json'),
});
