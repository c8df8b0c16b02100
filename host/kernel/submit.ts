import type { Json, Run, RunVersions, Submission } from '../model';
import { newId } from '../support/ids';
import type { EntryWrite } from './handler';
import type { Kernel } from './kernel';
import type { HandlerRegistry } from './registry';
import type { EffectWrite, Store } from '../store';
import { BerthError } from '../errors';

export interface SubmitInput {
  /** The caller's idempotency key: the same id always yields the same submission and run. */
  requestId: string;
  /** Existing session to continue, or omitted to start a new one. */
  sessionId?: string;
  runKind: string;
  root: { kind: string; version?: number; input: Json };
  input?: Json;
  entries?: EntryWrite[];
  versions?: RunVersions;
  sessionMeta?: Json;
  /** The reason of the run's first transition (default `submitted`). */
  reason?: string;
  /** Who submits, recorded as the first transition's actor (default: the host). */
  actor?: string;
  /** The run this one was forked from: recorded on the run row, where `listForks` finds it. */
  forkedFromRunId?: string;
  /** Effects the new run starts with (a fork carries its parent's uncertain ones), given the new run and root task ids. */
  effects?: (ids: { runId: string; taskId: string }) => EffectWrite[];
  /**
   * The submitter drives the run itself, at once (an MCP server's call): the root task is created
   * `running` and the run moves to `running` in the submit commit, instead of in a start commit
   * of their own. A host that dies before the root's first phase ran counts a restart and
   * re-enters it, as after a start commit. Only for a host that holds the session from this
   * commit on: a run left to a worker would count a restart that never happened.
   */
  start?: boolean;
}

export interface Submitted {
  submission: Submission;
  run: Run;
  /** False when the request id had been submitted before. */
  created: boolean;
}

/**
 * Saves a submission, its run (admitted), its first entries and its root task in one commit.
 * A repeated request id returns the original submission and run and writes nothing.
 */
export async function submit(deps: { store: Store; kernel: Pick<Kernel, 'commit'>; registry: HandlerRegistry }, s: SubmitInput): Promise<Submitted> {
  const existing = await deps.store.findSubmission(s.requestId);
  if (existing) return { submission: existing, run: (await deps.store.getRun(existing.runId))!, created: false };
  const handler = s.root.version === undefined ? deps.registry.newest(s.root.kind) : deps.registry.find(s.root.kind, s.root.version);
  if (!handler) throw new BerthError('handler_unknown', `no handler registered for ${s.root.kind}`);
  if (s.sessionId && !(await deps.store.getSession(s.sessionId))) {
    throw new BerthError('session_not_found', `session ${s.sessionId} does not exist`, { ids: { sessionId: s.sessionId } });
  }
  const sessionId = s.sessionId ?? newId('ses');
  const submissionId = newId('sub');
  const runId = newId('run');
  const taskId = newId('task');
  const result = await deps.kernel.commit({
    sessionId,
    label: 'submit',
    ...(s.actor ? { actor: s.actor } : {}),
    ...(s.sessionId ? {} : { createSession: { meta: s.sessionMeta ?? null } }),
    submissions: [{ id: submissionId, requestId: s.requestId, runId, input: s.input ?? s.root.input }],
    runs: [{ id: runId, kind: s.runKind, submissionId, rootTaskId: taskId, versions: s.versions ?? {}, ...(s.reason ? { reason: s.reason } : {}), forkedFromRunId: s.forkedFromRunId ?? null }],
    tasks: [{ id: taskId, runId, parentId: null, kind: handler.kind, kindVersion: handler.version, phase: handler.initialPhase, input: s.root.input, ...(s.start ? { status: 'running' as const } : {}) }],
    ...(s.start ? { runTransitions: [{ runId, from: 'admitted' as const, to: 'running' as const, actor: '', reason: 'root task started', ...(s.versions?.kernel ? { versions: { kernel: s.versions.kernel } } : {}) }] } : {}),
    entries: (s.entries ?? []).map((e) => ({ id: newId('ent'), runId, taskId, conversationId: e.conversationId ?? null, kind: e.kind, body: e.body })),
    ...(s.effects ? { effects: s.effects({ runId, taskId }) } : {}),
  });
  if (!result.ok) {
    if (result.conflict.kind === 'duplicate_request') return submit(deps, s);
    // The session (an agent session's next message) is driven by another live host: nothing was written.
    if (result.conflict.kind === 'fence') throw new BerthError('run_owned', `session ${sessionId} is driven by another live host (epoch ${result.conflict.actual ?? '?'}); nothing was submitted. Wait for it to finish, or take its run over with berth resume RUN --take-over`, { retryable: true, ids: { sessionId } });
    throw new BerthError('submit_conflict', `submission ${s.requestId} not saved: ${result.conflict.kind}`, { retryable: true, details: result.conflict });
  }
  const submission = (await deps.store.getSubmission(submissionId))!;
  return { submission, run: (await deps.store.getRun(runId))!, created: true };
}
