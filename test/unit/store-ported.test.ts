import { afterAll, describe, expect, it } from 'vitest';
import { checkStore, exportRun, recordRows } from '../../host/record';
import type { NewArtifact } from '../../host/store';
import { STORE_KINDS, stopSharedPostgres, freshStores } from '../support/store-kinds';

afterAll(stopSharedPostgres, 60_000);

/**
 * The store features the SQLite store gained while the PostgreSQL store was written in parallel
 * (snapshot pushes, acceptance, cost, artifacts, imported runs, run reasons and owner changes),
 * each through the Store port on both stores, so the two keep the same semantics.
 */
describe.each(STORE_KINDS)('store features ported to both stores, on %s', (kind) => {
  const freshStore = freshStores(kind);
  const fresh = async () => (await freshStore()).store;

  const snap = (id: string, extra: object = {}) => ({ id, runId: 'run_1', taskId: null, leaseId: 'l', imageId: 'sha256:x', workspaceDigest: 'd', sizeBytes: 1, checkpoint: 'step:1', parentId: null, ...extra });
  const admit = { sessionId: 's1', label: 'submit', createSession: {}, runs: [{ id: 'run_1', kind: 'plan', submissionId: null, rootTaskId: null, versions: { kernel: 'k1' }, reason: 'forked from run_0' }] };

  it('marks a committed snapshot pushed once (compare-and-set), keeps a push acknowledged before its commit, and not a record that never committed', async () => {
    const store = await fresh();
    await store.commit({ ...admit, snapshots: [snap('snap_1'), snap('snap_s', { registryRef: 'r@sha256:s', pushedAt: 3 })] });
    expect(await store.getSnapshot('snap_s')).toMatchObject({ registryRef: 'r@sha256:s', pushedAt: 3 });
    expect((await store.getSnapshot('snap_1'))!.registryRef).toBeNull();
    expect(await store.markSnapshotPushed('snap_2', 'r@sha256:1', 5)).toBe(false);
    expect(await store.markSnapshotPushed('snap_1', 'r@sha256:1', 5)).toBe(true);
    expect(await store.markSnapshotPushed('snap_1', 'r@sha256:2', 6)).toBe(false);
    expect(await store.getSnapshot('snap_1')).toMatchObject({ registryRef: 'r@sha256:1', pushedAt: 5 });
  });

  it('lists a run\'s or session\'s snapshots pruned or not, pushed or not, whole, newest and by page, in the same order as unfiltered, and totals the kept ones', async () => {
    const store = await fresh();
    const ids = ['a', 'b', 'c', 'd', 'e', 'f'];
    await store.commit({ ...admit, snapshots: ids.map((id, i) => snap(id, { sizeBytes: i + 1, ...(i % 2 ? { registryRef: `r@sha256:${id}`, pushedAt: i } : {}) })) });
    for (const id of ['a', 'b', 'e']) await store.markSnapshotPruned(id, 9);
    // What /metrics reports, counted by the store: c kept locally, d (4 bytes) and f (6) pushed.
    expect(await store.snapshotTotals()).toEqual({ pushed: 2, unpushed: 1, pushedBytes: 10 });
    const names = (l: Array<{ id: string }>) => l.map((s) => s.id);
    expect(names(await store.listSnapshots({ runId: 'run_1' }))).toEqual(ids);
    expect(names(await store.listSnapshots({ runId: 'run_1', pruned: false }))).toEqual(['c', 'd', 'f']);
    expect(names(await store.listSnapshots({ sessionId: 's1', pruned: true }))).toEqual(['a', 'b', 'e']);
    expect(names(await store.listSnapshots({ pruned: false, pushed: true }))).toEqual(['d', 'f']);
    expect(names(await store.listSnapshots({ sessionId: 's1', pruned: true, pushed: true }))).toEqual(['b']);
    expect(names(await store.listSnapshots({ runId: 'run_1', pruned: false, newest: 2 }))).toEqual(['d', 'f']);
    expect(names(await store.listSnapshots({ sessionId: 's1', pruned: false, page: { offset: 1, limit: 1 } }))).toEqual(['d']);
    expect(names(await store.listSnapshots({ runId: 'run_2', pruned: false }))).toEqual([]);
  });

  it('records an acceptance decision once per request id, in commit order, and finds it by request id', async () => {
    const store = await fresh();
    await store.commit(admit);
    const decision = (id: string, requestId: string, d: 'accepted' | 'rejected') => ({ id, runId: 'run_1', requestId, decision: d, actor: 'user:ann', reason: null, evidence: { n: id } });
    expect((await store.commit({ sessionId: 's1', label: 'accept', acceptance: [decision('acc_1', 'r1', 'rejected')] })).ok).toBe(true);
    expect((await store.commit({ sessionId: 's1', label: 'accept', acceptance: [decision('acc_x', 'r1', 'accepted')] })).ok).toBe(true);
    expect((await store.commit({ sessionId: 's1', label: 'accept', acceptance: [decision('acc_2', 'r2', 'accepted')] })).ok).toBe(true);
    expect((await store.listAcceptance({ runId: 'run_1' })).map((d) => [d.id, d.decision, d.commitSeq])).toEqual([['acc_1', 'rejected', 2], ['acc_2', 'accepted', 4]]);
    expect(await store.findAcceptance('r1')).toMatchObject({ id: 'acc_1', evidence: { n: 'acc_1' }, reason: null });
    expect(await store.findAcceptance('r9')).toBeUndefined();
    expect(await store.listAcceptance({})).toHaveLength(2);
  });

  it('sums cost samples per run, meter and key, and lists one run\'s samples as recorded, whole or page by page', async () => {
    const store = await fresh();
    await store.recordCost({ runId: 'run_1', at: 10, key: 'model-a', meters: { 'tokens.prompt': 100, 'tokens.completion': 7.6 } });
    await store.recordCost({ runId: 'run_1', at: 20, key: 'model-a', meters: { 'tokens.prompt': 50 } });
    await store.recordCost({ runId: 'run_2', at: 15, key: 'lease_1', meters: { 'cpu.usec': 9, 'exec.count': Number.NaN } });
    expect(await store.sumCost()).toEqual([
      { runId: 'run_1', meter: 'tokens.completion', key: 'model-a', amount: 8 },
      { runId: 'run_1', meter: 'tokens.prompt', key: 'model-a', amount: 150 },
      { runId: 'run_2', meter: 'cpu.usec', key: 'lease_1', amount: 9 },
    ]);
    expect(await store.sumCost({ runIds: ['run_2'] })).toEqual([{ runId: 'run_2', meter: 'cpu.usec', key: 'lease_1', amount: 9 }]);
    expect((await store.listCost({ runId: 'run_1' })).map((c) => [c.at, c.meter, c.amount])).toEqual([[10, 'tokens.prompt', 100], [10, 'tokens.completion', 8], [20, 'tokens.prompt', 50]]);
    const page = async (offset: number) => (await store.listCost({ runId: 'run_1', page: { offset, limit: 2 } })).map((c) => [c.at, c.meter]);
    expect([await page(0), await page(2), await page(4)]).toEqual([[[10, 'tokens.prompt'], [10, 'tokens.completion']], [[20, 'tokens.prompt']], []]);
  });

  it('commits artifact records with their step and lists them in step, generation, path order', async () => {
    const store = await fresh();
    await store.commit(admit);
    const art = (id: string, stepIndex: number, generation: number, path: string): NewArtifact => ({ id, runId: 'run_1', taskId: null, stepIndex, generation, step: `s${stepIndex}`, path, sizeBytes: 3, sha256: 'ab', snapshotId: null });
    const r = await store.commit({ sessionId: 's1', label: 'step', artifacts: [art('a3', 1, 1, 'b.txt'), art('a1', 0, 1, 'z.txt'), art('a2', 1, 1, 'a.txt')] });
    expect(r.ok).toBe(true);
    await store.commit({ sessionId: 's1', label: 'step', artifacts: [art('a4', 0, 2, 'z.txt')] });
    const listed = await store.listArtifacts('run_1');
    expect(listed.map((a) => a.id)).toEqual(['a1', 'a4', 'a2', 'a3']);
    expect(listed[0]).toMatchObject({ sessionId: 's1', commitSeq: 2, snapshotId: null, taskId: null });
  });

  it('records a run\'s first-transition reason and an owner change as a same-state transition, carrying the versions', async () => {
    const store = await fresh();
    await store.commit(admit);
    await store.commit({ sessionId: 's1', label: 'go', runTransitions: [{ runId: 'run_1', from: 'admitted', to: 'running', actor: 'host:a', reason: 'go' }] });
    const take = await store.commit({ sessionId: 's1', label: 'run.take-over', runTransitions: [{ runId: 'run_1', from: 'running', to: 'running', actor: 'host:b', reason: 'take-over', ownerChange: true }] });
    expect(take.ok).toBe(true);
    const ts = await store.listRunTransitions('run_1');
    expect(ts.map((t) => [t.from, t.to, t.reason, t.versions])).toEqual([
      [null, 'admitted', 'forked from run_0', { kernel: 'k1' }],
      ['admitted', 'running', 'go', { kernel: 'k1' }],
      ['running', 'running', 'take-over', { kernel: 'k1' }],
    ]);
    await expect(store.commit({ sessionId: 's1', label: 'bad', runTransitions: [{ runId: 'run_1', from: 'running', to: 'running', actor: 'x', reason: 'no owner change' }] })).rejects.toThrow();
  });

  it('lists a session\'s runs of one kind, in some states, or its newest n, in creation order, and counts every run by state', async () => {
    const store = await fresh();
    // One commit: one created_at, so the ids (which sort as created) give the order.
    const run = (id: string, kind: string) => ({ id, kind, submissionId: null, rootTaskId: null, versions: { kernel: 'k1' } });
    await store.commit({ sessionId: 's1', label: 'submit', createSession: {}, runs: [run('run_1a', 'agent'), run('run_2p', 'plan'), run('run_3b', 'agent'), run('run_4c', 'agent')] });
    await store.commit({ sessionId: 's2', label: 'submit', createSession: {}, runs: [run('run_9z', 'agent')] });
    await store.commit({ sessionId: 's1', label: 'go', runTransitions: ['run_1a', 'run_2p', 'run_3b', 'run_4c'].map((runId) => ({ runId, from: 'admitted' as const, to: 'running' as const, actor: 'a', reason: 'go' })) });
    await store.commit({ sessionId: 's1', label: 'end', runTransitions: ['run_1a', 'run_2p', 'run_4c'].map((runId) => ({ runId, from: 'running' as const, to: 'completed' as const, actor: 'a', reason: 'x' })) });
    const ids = (l: Array<{ id: string }>) => l.map((r) => r.id);
    expect(ids(await store.listRuns({ sessionId: 's1' }))).toEqual(['run_1a', 'run_2p', 'run_3b', 'run_4c']);
    expect(ids(await store.listRuns({ sessionId: 's1', kind: 'agent' }))).toEqual(['run_1a', 'run_3b', 'run_4c']);
    expect(ids(await store.listRuns({ sessionId: 's1', kind: 'agent', newest: 2 }))).toEqual(['run_3b', 'run_4c']);
    expect(ids(await store.listRuns({ sessionId: 's1', newest: 1 }))).toEqual(['run_4c']);
    expect(ids(await store.listRuns({ sessionId: 's1', kind: 'plan', newest: 5 }))).toEqual(['run_2p']);
    expect(ids(await store.listRuns({ sessionId: 's1', states: ['running', 'admitted'] }))).toEqual(['run_3b']);
    expect(ids(await store.listRuns({ kind: 'agent', newest: 1 }))).toEqual(['run_9z']);
    expect(await store.countRunsByState()).toEqual({ completed: 3, running: 1, admitted: 1 });
  });

  it('imports an exported run read-only: the record checks clean, every commit to it is refused, and a second import conflicts', async () => {
    const source = await fresh();
    // A plan run as a host admits one: its root task and the versions in force (berth check wants both).
    const planRun = { ...admit.runs[0]!, rootTaskId: 'task_1', versions: { kernel: 'k1', envFingerprint: 'sha256:env' } };
    await source.commit({ ...admit, runs: [planRun], tasks: [{ id: 'task_1', runId: 'run_1', parentId: null, kind: 'k', kindVersion: 1, phase: 'p', input: {} }], entries: [{ id: 'e1', runId: 'run_1', kind: 'note', body: { hi: 1 } }] });
    await source.commit({ sessionId: 's1', label: 'go', runTransitions: [{ runId: 'run_1', from: 'admitted', to: 'running', actor: 'host:a', reason: 'go' }] });
    const { record } = await exportRun(source, 'run_1', 100);
    const target = await fresh();
    await target.importRun(recordRows(record, 'test'), 200);
    expect(await target.isImportedSession('s1')).toBe(true);
    expect(await target.isImportedSession('s2')).toBe(false);
    expect(await target.getImportedRun('run_1')).toMatchObject({ runId: 'run_1', sessionId: 's1', source: 'test', importedAt: 200 });
    expect((await target.listImportedRuns()).map((r) => r.runId)).toEqual(['run_1']);
    expect((await target.getRun('run_1'))!.state).toBe('running');
    expect((await target.listEntries('s1')).map((e) => e.id)).toEqual(['e1']);
    expect((await checkStore(target, 'all', 300)).violations).toEqual([]);
    await expect(target.commit({ sessionId: 's1', label: 'x', entries: [{ id: 'e9', kind: 'k', body: 1 }] })).rejects.toMatchObject({ code: 'run_imported' });
    await expect(target.importRun(recordRows(record, 'test'), 201)).rejects.toMatchObject({ code: 'import_conflict' });
  });
});
