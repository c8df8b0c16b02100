import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import type { Store } from '../../host/store';
import { deletePrunedManifests, pruneSnapshots } from '../../host/snapshot';
import { STORE_KINDS, stopSharedPostgres, freshStores } from '../support/store-kinds';

afterAll(stopSharedPostgres, 60_000);

/** A view of `store` that counts the snapshot records its `listSnapshots` hands back. */
function counting(store: Store): { store: Store; rows: () => number } {
  let rows = 0;
  const view = Object.assign(Object.create(store) as Store, {
    listSnapshots: async (f: Parameters<Store['listSnapshots']>[0]) => {
      const out = await store.listSnapshots(f);
      rows += out.length;
      return out;
    },
  });
  return { store: view, rows: () => rows };
}

describe.each(STORE_KINDS)('retention at the end of a long run, on %s', (kind) => {
  const fresh = freshStores(kind);

  it('reads the records it can still prune and the pruned pushed ones, not every record the run left: 400 snapshots, 395 pruned while it ran', async () => {
    const t = await fresh();
    const snap = (i: number) => ({ id: `snap_${String(i).padStart(4, '0')}`, runId: 'run_1', taskId: null, leaseId: 'l', imageId: `sha256:${i}`, workspaceDigest: 'd', sizeBytes: 1, checkpoint: `step:${i}`, parentId: null });
    await t.store.commit({ sessionId: 's1', label: 'submit', createSession: {}, runs: [{ id: 'run_1', kind: 'plan', submissionId: null, rootTaskId: null, versions: { kernel: 'k1' } }] });
    for (let i = 0; i < 395; i += 79) await t.store.commit({ sessionId: 's1', label: 'snap', snapshots: Array.from({ length: 79 }, (_, k) => snap(i + k)) });
    for (let i = 395; i < 400; i++) await t.store.commit({ sessionId: 's1', label: 'snap', snapshots: [snap(i)] });
    for (let i = 0; i < 395; i++) await t.store.markSnapshotPruned(snap(i).id, 5);
    await t.store.commit({ sessionId: 's1', label: 'end', runTransitions: [{ runId: 'run_1', from: 'admitted', to: 'running', actor: 'a', reason: 'go' }] });
    await t.store.commit({ sessionId: 's1', label: 'end', runTransitions: [{ runId: 'run_1', from: 'running', to: 'completed', actor: 'a', reason: 'done' }] });
    const c = counting(t.store);
    const removed: string[] = [];
    const deps = { store: c.store, removeSnapshot: async (tag: string) => (removed.push(tag), 'removed' as const), clock: { now: () => 10 }, logger: pino({ level: 'silent' }) };
    const pruned = await pruneSnapshots(deps, { keepLast: 2, sessionId: 's1' });
    expect(pruned.map((s) => s.id)).toEqual([snap(397).id, snap(396).id, snap(395).id]);
    expect(removed).toHaveLength(3);
    expect(await deletePrunedManifests({ ...deps, deleteManifest: async () => 'deleted' as const }, { sessionId: 's1' })).toEqual({ deleted: [], pending: [] });
    // The five unpruned records, and no pushed ones: before, each pass read all 400.
    expect(c.rows()).toBe(5);
    expect((await t.store.listSnapshots({ runId: 'run_1', pruned: false })).map((s) => s.id)).toEqual([snap(398).id, snap(399).id]);
  });
});
