import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { BerthError } from '../../host/errors';
import { deletePrunedManifests } from '../../host/snapshot';
import { STORE_KINDS, stopSharedPostgres, freshStores } from '../support/store-kinds';

afterAll(stopSharedPostgres, 60_000);

const ref = (registry: string, n: number) => `${registry}/berth-snapshot@sha256:${String(n).repeat(64).slice(0, 64)}`;
const A = '127.0.0.1:5001';
const B = '127.0.0.1:5002';

/** Which manifests are due for deletion, derived from the records on both stores; the registry is a recorder here (the real one is in test/integration/registry-gc.test.ts). */
describe.each(STORE_KINDS)('pruned snapshot manifests leave the registry, on %s', (kind) => {
  const fresh = freshStores(kind);

  it('deletes a pruned manifest once, keeps one an unpruned record shares, retries a failed one, asks an unreachable registry once per pass, and deletes again a manifest pushed anew after its deletion', async () => {
    const t = await fresh();
    const store = t.store;
    const snap = (id: string, registryRef: string, pushedAt: number) => ({ id, runId: 'run_1', taskId: null, leaseId: 'l', imageId: 'sha256:x', workspaceDigest: 'd', sizeBytes: 1, checkpoint: `step:${id}`, parentId: null, registryRef, pushedAt });
    await store.commit({
      sessionId: 's1',
      label: 'submit',
      createSession: {},
      runs: [{ id: 'run_1', kind: 'plan', submissionId: null, rootTaskId: null, versions: { kernel: 'k1' } }],
      snapshots: [snap('s1', ref(A, 1), 10), snap('s2', ref(A, 2), 20), snap('s3', ref(A, 2), 30), snap('s4', ref(A, 3), 40), snap('s5', ref(B, 4), 50), snap('s6', ref(B, 5), 60)],
    });
    for (const id of ['s1', 's2', 's4', 's5', 's6']) await store.markSnapshotPruned(id, 100);
    let now = 1000;
    const asked: string[] = [];
    let failing = new Set([ref(A, 3)]);
    let bDown = true;
    const deps = {
      store,
      clock: { now: () => now },
      logger: pino({ level: 'silent' }),
      async deleteManifest(r: string) {
        asked.push(r);
        if (r.startsWith(B) && bDown) throw new BerthError('registry_unreachable', `delete ${r}: registry ${B} unreachable`, { retryable: true });
        if (failing.has(r)) throw new BerthError('registry_error', `delete ${r}: registry ${A}: HTTP 500`);
        return 'deleted' as const;
      },
    };

    const first = await deletePrunedManifests(deps);
    // s2's manifest is s3's too (unpruned): kept. Registry B is asked once, its second manifest left pending unasked.
    expect(first.deleted).toEqual([ref(A, 1)]);
    expect(first.pending.map((p) => p.registryRef).sort()).toEqual([ref(A, 3), ref(B, 4), ref(B, 5)].sort());
    expect(asked.filter((r) => r.startsWith(B))).toHaveLength(1);
    expect(asked).not.toContain(ref(A, 2));

    failing = new Set();
    bDown = false;
    asked.length = 0;
    now = 2000;
    const second = await deletePrunedManifests(deps);
    expect(second).toEqual({ deleted: expect.arrayContaining([ref(A, 3), ref(B, 4), ref(B, 5)]), pending: [] });
    expect(asked).toHaveLength(3);
    expect(await deletePrunedManifests(deps)).toEqual({ deleted: [], pending: [] });

    // The same image snapshotted and pushed again later (the manifest is back), then pruned: due again.
    await store.commit({ sessionId: 's1', label: 'snap', snapshots: [snap('s7', ref(A, 1), 5000)] });
    expect(await deletePrunedManifests(deps)).toEqual({ deleted: [], pending: [] });
    await store.markSnapshotPruned('s7', 6000);
    now = 7000;
    expect(await deletePrunedManifests(deps, { sessionId: 'other' })).toEqual({ deleted: [], pending: [] });
    expect(await deletePrunedManifests(deps, { sessionId: 's1' })).toEqual({ deleted: [ref(A, 1)], pending: [] });
    expect((await store.listRegistryDeletes()).find((d) => d.registryRef === ref(A, 1))!.deletedAt).toBe(7000);
  });
});
