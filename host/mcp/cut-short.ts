import { parseDictated } from '../agent';
import type { Run } from '../model';
import type { Store } from '../store';
import type { CallOutcome } from './call-outcome';

/**
 * The outcome of a call whose run ended without a tool result: it was cancelled (by its client,
 * `notifications/cancelled`, or `berth cancel`). Stopped while it ran, its effect is uncertain and
 * the run awaits a reconcile decision, unless it was a safe call in a sandbox with no network (it
 * changed nothing: the run ended cancelled); cancelled before its effect began, nothing ran. Null for
 * any other run without a result (a host failure, reported as such).
 */
export async function cutShort(store: Store, run: Run): Promise<Pick<CallOutcome, 'status' | 'isError' | 'content'> | null> {
  const cancelled = (await store.listRunTransitions(run.id)).some((t) => t.to === 'cancelling');
  if (!cancelled) return null;
  if (run.state === 'needs_reconciliation') {
    return {
      status: 'uncertain',
      isError: true,
      content: 'error: this call was cancelled while it ran, so it may or may not have taken effect; it was not run again. Decide it with the reconcile tool (accept: it took effect, or fail) before the next call',
    };
  }
  if (run.state === 'cancelled') {
    // Settled not applied though it ran (host/agent/tool-cancel.ts): said so, not "nothing ran".
    const settled = (await store.listEffects({ runId: run.id })).some((e) => (e.error as { code?: unknown } | null)?.code === 'cancelled_not_applied');
    if (settled) return { status: 'error', isError: true, content: 'error: this call was cancelled while it ran; a safe call in a sandbox with no network changed nothing, so it needs no decision. It was not run again' };
    return { status: 'error', isError: true, content: 'error: this call was cancelled before it took effect; nothing ran' };
  }
  return null;
}

/** The call a run was submitted for (its call id and tool), from the dictated message of its submission. */
export async function dictatedCallOf(store: Store, run: Run): Promise<{ callId: string; tool: string } | null> {
  const sub = run.submissionId ? await store.getSubmission(run.submissionId) : undefined;
  const message = (sub?.input as { message?: unknown } | null | undefined)?.message;
  const call = typeof message === 'string' ? parseDictated(message) : null;
  return call ? { callId: call.id, tool: call.tool } : null;
}
