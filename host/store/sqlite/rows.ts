import type { Effect, Entry, Run, RunTransition, Snapshot, StoredDocument, Submission, Task } from '../../model';

/** JSON columns are written only by this store, so parsing cannot meet foreign text. */
export const parse = <T>(text: string | null): T => (text === null ? (null as T) : (JSON.parse(text) as T));
export const json = (value: unknown): string => JSON.stringify(value ?? null);

export type Row = Record<string, unknown>;

export function toTask(r: Row): Task {
  return {
    id: r.id as string,
    sessionId: r.session_id as string,
    runId: (r.run_id as string | null) ?? null,
    parentId: (r.parent_id as string | null) ?? null,
    kind: r.kind as string,
    kindVersion: r.kind_version as number,
    status: r.status as Task['status'],
    phase: r.phase as string,
    checkpoint: parse(r.checkpoint_json as string),
    input: parse(r.input_json as string),
    attempts: r.attempts as number,
    restarts: r.restarts as number,
    wait: parse(r.wait_json as string | null),
    wakeAt: (r.wake_at as number | null) ?? null,
    outcome: (r.outcome as Task['outcome']) ?? null,
    result: parse(r.result_json as string),
    error: parse(r.error_json as string | null),
    cancelRequested: r.cancel_requested === 1,
    blockedReason: (r.blocked_reason as string | null) ?? null,
    version: r.version as number,
    createdAt: r.created_at as number,
    updatedAt: r.updated_at as number,
  };
}

export function toRun(r: Row): Run {
  return {
    id: r.id as string,
    sessionId: r.session_id as string,
    submissionId: (r.submission_id as string | null) ?? null,
    kind: r.kind as string,
    state: r.state as Run['state'],
    rootTaskId: (r.root_task_id as string | null) ?? null,
    transitionCount: r.transition_count as number,
    versions: parse(r.versions_json as string),
    createdAt: r.created_at as number,
    updatedAt: r.updated_at as number,
  };
}

export function toRunTransition(r: Row): RunTransition {
  return {
    runId: r.run_id as string,
    n: r.n as number,
    at: r.at as number,
    actor: r.actor as string,
    from: (r.from_state as RunTransition['from']) ?? null,
    to: r.to_state as RunTransition['to'],
    reason: r.reason as string,
    versions: parse(r.versions_json as string),
    commitSeq: r.commit_seq as number,
  };
}

export function toEntry(r: Row): Entry {
  return {
    id: r.id as string,
    sessionId: r.session_id as string,
    seq: r.seq as number,
    conversationId: (r.conversation_id as string | null) ?? null,
    runId: (r.run_id as string | null) ?? null,
    taskId: (r.task_id as string | null) ?? null,
    kind: r.kind as string,
    body: parse(r.body_json as string),
    commitSeq: r.commit_seq as number,
    at: r.at as number,
  };
}

export function toEffect(r: Row): Effect {
  return {
    id: r.id as string,
    sessionId: r.session_id as string,
    runId: (r.run_id as string | null) ?? null,
    taskId: (r.task_id as string | null) ?? null,
    kind: r.kind as string,
    intent: parse(r.intent_json as string),
    replay: r.replay as Effect['replay'],
    status: r.status as Effect['status'],
    attempts: r.attempts as number,
    receipt: parse(r.receipt_json as string),
    error: parse(r.error_json as string),
    createdAt: r.created_at as number,
    updatedAt: r.updated_at as number,
  };
}

export function toSubmission(r: Row): Submission {
  return {
    id: r.id as string,
    sessionId: r.session_id as string,
    requestId: r.request_id as string,
    runId: r.run_id as string,
    input: parse(r.input_json as string),
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
export const toDocument = (r: Row, baselineJson: string, ops: Row[]): StoredDocument => ({
  id: r.id as string,
  sessionId: r.session_id as string,
  runId: (r.run_id as string | null) ?? null,
  type: r.type as string,
  version: r.version as number,
  baselineVersion: r.baseline_version as number,
  baseline: parse(baselineJson),
  ops: ops.map((o) => ({ version: o.version as number, op: parse(o.op_json as string) })),
});
