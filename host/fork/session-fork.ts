import { sessionSandboxDocId, TOOL_KIND, type SandboxState } from '../agent';
import { BerthError } from '../errors';
import type { Kernel } from '../kernel';
import { isFinalRunState, plainJson, type Json, type Run } from '../model';
import { SANDBOX_DOC } from '../run-sandbox';
import type { Store } from '../store';
import { newId } from '../support';
import type { ForkedFrom } from './lineage';
import { sessionNotFound } from '../store/missing-run';

export interface SessionForkDeps {
  store: Store;
  kernel: Pick<Kernel, 'commit'>;
  imageExists(imageId: string): Promise<boolean>;
  /** Gives the snapshot image one more name, so the fork's own snapshot record keeps it alive. */
  tag(imageId: string, snapshotId: string, o?: { storeId?: string }): Promise<void>;
}

/**
 * `berth fork SESSION --at TURN`: a new agent session whose conversation and workspace are as they
 * were after turn TURN (the TURN-th message of the session and everything it caused). The
 * conversation is copied (entries are immutable, and the model's context is rebuilt from the
 * session's own entries); the workspace is the snapshot the newest mutating tool call of those
 * turns committed, given a record of the new session (same image, another tag) so retention of
 * either session never takes the other's. The original session is untouched. `berth chat NEW`
 * continues the fork with the settings of the turn it was forked at.
 */
export async function forkSession(d: SessionForkDeps, sessionId: string, at: string, actor: string): Promise<{ sessionId: string; forkedFrom: ForkedFrom; entries: number }> {
  const runs = (await d.store.listRuns({ sessionId })).filter((r) => r.kind === 'agent');
  if (runs.length === 0) throw await sessionNotFound(d.store, sessionId);
  const turn = /^\d+$/.test(at) ? Number(at) : NaN;
  if (!(turn >= 1 && turn <= runs.length)) throw new BerthError('fork_invalid', `--at ${at}: session ${sessionId} has turns 1-${runs.length} (one per message)`, { ids: { sessionId } });
  const run = runs[turn - 1]!;
  if (!isFinalRunState(run.state)) {
    const what = run.state === 'needs_reconciliation' ? `reconcile it first (berth reconcile ${run.id})` : 'fork a finished turn';
    throw new BerthError('fork_invalid', `turn ${turn} of session ${sessionId} (run ${run.id}) is ${run.state}: ${what}`, { ids: { sessionId, runId: run.id } });
  }
  const upTo = new Set(runs.slice(0, turn).map((r) => r.id));
  const snap = await stateAfter(d.store, sessionId, upTo, run);
  const forkedFrom: ForkedFrom = { runId: run.id, snapshotId: snap.id, checkpoint: `turn:${turn}`, index: turn };
  const newSession = newId('ses');
  const own = newId('snap');
  // Image name first, record second: a crash between leaves a tag no record names, which gc removes.
  // An image this engine lacks but a registry holds is pulled by the first restore; it is tagged there.
  // An environment's image (a fresh sandbox's snapshot) also gets a tag naming this store.
  if (await d.imageExists(snap.imageId)) await d.tag(snap.imageId, own, { storeId: await d.store.storeId() });
  else if (!(snap.registryRef && snap.pushedAt !== null)) throw new BerthError('snapshot_pruned', `snapshot ${snap.id} has no image on this engine (${snap.imageId}) and was not pushed to a registry`, { ids: { sessionId, snapshotId: snap.id } });
  const entries = (await d.store.listEntries(sessionId)).filter((e) => e.runId !== null && upTo.has(e.runId));
  const pointer = { leaseId: null, snapshotId: own, workspaceDigest: snap.workspaceDigest };
  const r = await d.kernel.commit({
    sessionId: newSession,
    label: 'session.fork',
    actor,
    createSession: { meta: plainJson({ agent: true, task: `fork of ${sessionId} at turn ${turn}`, forkedFrom }) },
    entries: entries.map((e) => ({ id: newId('ent'), kind: e.kind, body: e.body })),
    snapshots: [{ id: own, runId: null, taskId: null, leaseId: snap.leaseId, imageId: snap.imageId, workspaceDigest: snap.workspaceDigest, sizeBytes: 0, checkpoint: `fork:${sessionId}:turn:${turn}`, parentId: snap.id, registryRef: snap.registryRef, pushedAt: snap.pushedAt }],
    documentOps: [{ documentId: sessionSandboxDocId(newSession), create: { type: SANDBOX_DOC, runId: null, initial: pointer as unknown as Json }, expectVersion: 0, op: null }],
  });
  if (!r.ok) throw new BerthError('fork_conflict', `fork of session ${sessionId} not saved: ${r.conflict.kind}`, { retryable: true, ids: { sessionId } });
  return { sessionId: newSession, forkedFrom, entries: entries.length };
}

/** The snapshot holding the session's workspace after the turns in `upTo`: the newest state a mutating tool of theirs committed, else the session's start (its upload, or the fork it began as). */
async function stateAfter(store: Store, sessionId: string, upTo: Set<string>, run: Run) {
  let best: SandboxState | null = null;
  for (const t of await store.listTasks({ sessionId })) {
    if (t.kind !== TOOL_KIND || t.status !== 'terminal' || !t.runId || !upTo.has(t.runId)) continue;
    const s = (t.result as { sandbox?: SandboxState } | null)?.sandbox;
    if (s && (!best || s.measuredAt > best.measuredAt)) best = s;
  }
  const snaps = await store.listSnapshots({ sessionId });
  // No tool changed a file: the session's start, its upload's snapshot or, for a fork, the one it began from.
  const id = best ? best.snapshotId : (snaps.find((s) => s.checkpoint === 'agent:start' || s.checkpoint.startsWith('fork:'))?.id ?? null);
  if (!id) {
    throw new BerthError('fork_invalid', `no snapshot holds the workspace of session ${sessionId} after run ${run.id}: its environment's snapshot.policy is not after-each-step, and no snapshot call (MCP's snapshot tool) up to there took one`, { ids: { sessionId, runId: run.id } });
  }
  const snap = snaps.find((s) => s.id === id) ?? (await store.getSnapshot(id));
  if (!snap || snap.prunedAt !== null) {
    throw new BerthError('snapshot_pruned', `snapshot ${id} (the workspace of session ${sessionId} after run ${run.id}) was pruned; it cannot be forked there`, { ids: { sessionId, snapshotId: id } });
  }
  return snap;
}
