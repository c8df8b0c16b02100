import { BerthError } from '../errors';
import { z } from 'zod';
import { storedValue } from '../kernel';
import { plainJson, type Task } from '../model';
import type { Store, TaskTransitionInput } from '../store';
import { ToolCallInputSchema } from './agent-input';
import { TOOL_KIND } from './agent-sandbox';
import { runResumeTransition } from './approval-run-state';
import { awaitsApproval, TIMER_KIND } from './approval-timer';
import { ENTRY, type ApprovalDecidedEntry, type ApprovalRequestedEntry } from './entries';
import { ApprovalRequestSchema, ApprovalSignalSchema, type ApprovalSignal } from './tool-checkpoint';

/** An approval request of a run, open or decided. */
export interface ApprovalView extends ApprovalRequestedEntry {
  state: 'pending' | 'approved' | 'denied' | 'expired' | 'cancelled';
  by?: string;
}

/** Every approval request of a run with its state, from the entries (the record) and the waiting tasks. */
export async function listApprovals(store: Store, runId: string): Promise<ApprovalView[]> {
  const run = await store.getRun(runId);
  if (!run) throw new BerthError('run_not_found', `no run ${runId}`, { ids: { runId } });
  // The two kinds it reads, not every entry of the run (a long run's page read thousands at each render).
  const entries = await store.listEntries(run.sessionId, { runId, kinds: [ENTRY.approvalRequested, ENTRY.approvalDecided] });
  const decided = new Map(entries.filter((e) => e.kind === ENTRY.approvalDecided).map((e) => [(e.body as unknown as ApprovalDecidedEntry).approvalId, e.body as unknown as ApprovalDecidedEntry]));
  return entries
    .filter((e) => e.kind === ENTRY.approvalRequested)
    .map((e) => {
      const r = e.body as unknown as ApprovalRequestedEntry;
      const d = decided.get(r.approvalId);
      return { approvalId: r.approvalId, toolCallId: r.toolCallId, tool: r.tool, arguments: r.arguments, digest: r.digest, expiresAt: r.expiresAt, state: d ? d.decision : 'pending', ...(d ? { by: d.by } : {}) };
    });
}

const DECIDED = { approve: 'approved', deny: 'denied', expired: 'expired' } as const;

export interface DecideApproval {
  runId: string;
  /** The tool call id or the approval id. */
  id: string;
  decision: 'approve' | 'deny';
  /** The digest the operator reviewed; when given it must equal the request's. */
  digest?: string;
  actor: string;
  now: number;
}

/**
 * An operator's decision, committed as one compare-and-set: the waiting tool task re-enters its
 * `decided` phase with the decision, its expiry timer is woken to finish, and the run returns to
 * `running` when no other request of it is open. Refused: an unknown id, a request not open
 * (already decided, expired, or not yet asked), an approval after the expiry, an approval whose
 * digest is not the request's.
 */
export async function decideApproval(store: Store, o: DecideApproval): Promise<ApprovalView> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const run = await store.getRun(o.runId);
    if (!run) throw new BerthError('run_not_found', `no run ${o.runId}`, { ids: { runId: o.runId } });
    const views = await listApprovals(store, o.runId);
    const view = views.find((v) => v.approvalId === o.id || v.toolCallId === o.id);
    const tasks = await store.listTasks({ runId: o.runId });
    const toolCallId = view?.toolCallId ?? o.id;
    const tool = tasks.find((t) => t.kind === TOOL_KIND && storedValue(ToolCallInputSchema, t.input, { what: 'input', kind: TOOL_KIND, taskId: t.id }).toolCallId === toolCallId);
    if (!view || !tool) throw new BerthError('approval_not_found', `run ${o.runId} has no approval request ${o.id}`, { ids: { runId: o.runId } });
    if (!awaitsApproval(tool)) {
      // Decided but not yet carried out (a double click's second request lands here): the decision is in the checkpoint only.
      const signal = ApprovalSignalSchema.safeParse((tool.checkpoint as { approval?: unknown } | null)?.approval);
      const state =
        view.state === 'pending' && signal.success ? `already ${DECIDED[signal.data.decision]}${signal.data.decision === 'expired' ? '' : ` by ${signal.data.by}`} at ${new Date(signal.data.at).toISOString()}`
        : view.state === 'pending' ? 'not open (the call is no longer waiting)'
        : view.state === 'cancelled' ? `closed when the run was cancelled${view.by ? ` (by ${view.by})` : ''}`
        : `already ${view.state}${view.by ? ` by ${view.by}` : ''}`;
      throw new BerthError('approval_not_pending', `approval ${view.approvalId} (call ${view.toolCallId}) is ${state}; a decision cannot be changed`, { ids: { runId: o.runId, taskId: tool.id } });
    }
    const { request } = storedValue(z.object({ request: ApprovalRequestSchema }), tool.checkpoint, { what: 'checkpoint', kind: TOOL_KIND, taskId: tool.id });
    if (o.decision === 'approve' && o.now > request.expiresAt) {
      throw new BerthError('approval_expired', `approval ${request.id} expired at ${new Date(request.expiresAt).toISOString()}; the call will not run`, { ids: { runId: o.runId, taskId: tool.id } });
    }
    if (o.decision === 'approve' && o.digest !== undefined && o.digest !== request.digest) {
      throw new BerthError('approval_digest_mismatch', `approval ${request.id} is for digest ${request.digest}, not ${o.digest}: the call's tool or arguments differ from what was reviewed`, {
        ids: { runId: o.runId, taskId: tool.id },
        details: { expected: request.digest, given: o.digest },
      });
    }
    const signal: ApprovalSignal = { decision: o.decision, digest: o.decision === 'approve' ? (o.digest ?? request.digest) : null, by: o.actor, at: o.now };
    const transitions: TaskTransitionInput[] = [
      { taskId: tool.id, expectVersion: tool.version, set: { status: 'running', phase: tool.wait!.phase, wait: null, attempts: 0, checkpoint: plainJson({ ...(tool.checkpoint as object), approval: signal }) } },
    ];
    const timer = tasks.find((t) => t.kind === TIMER_KIND && t.parentId === tool.parentId && (t.input as { toolCallId?: string }).toolCallId === toolCallId && t.status !== 'terminal');
    if (timer) transitions.push(wakeNow(timer, o.now));
    const r = await store.commit({
      sessionId: run.sessionId,
      label: `approval.${o.decision}`,
      actor: o.actor,
      taskTransitions: transitions,
      runTransitions: await runResumeTransition(store, tool, `${o.actor} ${o.decision === 'approve' ? 'approved' : 'denied'} ${request.id}`, o.actor),
    });
    if (r.ok) return { ...view, state: o.decision === 'approve' ? 'approved' : 'denied', by: o.actor };
    // Someone moved first (the expiry, another operator, the timer committing its sleep): look again.
  }
  throw new BerthError('approval_conflict', `run ${o.runId} kept changing; try again`, { retryable: true, ids: { runId: o.runId } });
}

/** A sleeping timer wakes now; a timer still in its first phase re-runs it and sees the decision. */
function wakeNow(timer: Task, now: number): TaskTransitionInput {
  return { taskId: timer.id, expectVersion: timer.version, set: timer.status === 'sleeping' ? { wakeAt: now } : {} };
}
