import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Json } from '../../host/model';
import type { ImportRows, Store } from '../../host/store';
import { rawSql, STORE_KINDS, stopSharedPostgres, tempStoreOf } from '../support/store-kinds';

afterAll(stopSharedPostgres, 60_000);

const from = (runId: string) => ({ runId, snapshotId: `snap_of_${runId}`, checkpoint: 'step:0:one', index: 1 });

/**
 * The rows a plan submit commits: a session, its run and the run's root task, whose input records
 * the fork (`fork`), as `host/fork/submit-fork.ts` writes it. `column` is what the submit says
 * about the parent; rows written before schema version 16 had no such column (undefined).
 */
async function planRun(store: Store, id: string, fork: string | null, column: string | null | undefined) {
  const r = await store.commit({
    sessionId: `ses_${id}`,
    label: 'submit',
    createSession: { meta: fork ? { plan: 'p.yaml', forkedFrom: from(fork) } : { plan: 'p.yaml' } },
    runs: [{ id, kind: 'plan', submissionId: null, rootTaskId: `task_${id}`, versions: {}, ...(column !== undefined ? { forkedFromRunId: column } : {}) }],
    tasks: [{ id: `task_${id}`, runId: id, parentId: null, kind: 'plan', kindVersion: 1, phase: 'start', input: { planFile: 'p.yaml', ...(fork ? { fork: from(fork) } : {}) } as Json }],
  });
  expect(r.ok).toBe(true);
}

/**
 * A forked agent session (`berth fork SESSION --at TURN` writes only the session, with `forkedFrom`
 * in its meta) and two messages to it: the first run is the fork, the second continues it.
 */
async function agentForkSession(store: Store, parent: string, firstColumn: string | undefined) {
  const sessionId = 'ses_agent_fork';
  expect((await store.commit({ sessionId, label: 'session.fork', createSession: { meta: { agent: true, task: 'fork', forkedFrom: from(parent) } } })).ok).toBe(true);
  for (const [id, column] of [['run_a1', firstColumn], ['run_a2', undefined]] as const) {
    const r = await store.commit({
      sessionId,
      label: 'submit',
      runs: [{ id, kind: 'agent', submissionId: null, rootTaskId: `task_${id}`, versions: {}, ...(column !== undefined ? { forkedFromRunId: column } : {}) }],
      tasks: [{ id: `task_${id}`, runId: id, parentId: null, kind: 'agent', kindVersion: 1, phase: 'start', input: { message: id } }],
    });
    expect(r.ok).toBe(true);
  }
}

const ids = async (store: Store, runId: string) => (await store.listForks(runId)).map((r) => r.id);

describe.each(STORE_KINDS)('the forks of a run on %s', (kind) => {
  let t: Awaited<ReturnType<typeof tempStoreOf>> | undefined;
  afterEach(async () => {
    await t?.cleanup();
    t = undefined;
  });

  it('lists the plan fork and the forked session\'s first run by the run they were forked from, and no run that is not a fork', async () => {
    t = await tempStoreOf(kind);
    await planRun(t.store, 'run_p', null, null);
    await planRun(t.store, 'run_f1', 'run_p', 'run_p');
    await planRun(t.store, 'run_u', null, null);
    await agentForkSession(t.store, 'run_p', 'run_p');
    await planRun(t.store, 'run_f2', 'run_f1', 'run_f1');
    expect(await ids(t.store, 'run_p')).toEqual(['run_f1', 'run_a1']);
    expect(await ids(t.store, 'run_f1')).toEqual(['run_f2']);
    expect(await ids(t.store, 'run_u')).toEqual([]);
    expect(await ids(t.store, 'run_a1')).toEqual([]);
    expect(await ids(t.store, 'run_nothing')).toEqual([]);
    expect((await t.store.listForks('run_p'))[0]).toEqual(await t.store.getRun('run_f1'));
  });

  it('finds the forks a store at schema version 14 holds, from their root input and their session\'s meta', async () => {
    t = await tempStoreOf(kind);
    await planRun(t.store, 'run_p', null, undefined);
    await planRun(t.store, 'run_f1', 'run_p', undefined);
    await planRun(t.store, 'run_u', null, undefined);
    await agentForkSession(t.store, 'run_p', undefined);
    await planRun(t.store, 'run_f2', 'run_f1', undefined);
    // The store as Berth left it before version 16: no parent column, no index.
    await rawSql(t.store, 'DROP INDEX runs_by_fork');
    await rawSql(t.store, 'ALTER TABLE runs DROP COLUMN forked_from_run_id');
    await rawSql(t.store, 'DELETE FROM schema_migrations WHERE version = 16');
    await t.store.close();
    const again = await t.open();
    expect(await ids(again, 'run_p')).toEqual(['run_f1', 'run_a1']);
    expect(await ids(again, 'run_f1')).toEqual(['run_f2']);
    expect(await ids(again, 'run_u')).toEqual([]);
    expect(await ids(again, 'run_a1')).toEqual([]);
  });

  it('lists an imported fork under the run its record names as parent', async () => {
    t = await tempStoreOf(kind);
    const rows = (id: string, parent: string | null): ImportRows => ({
      digest: `sha256:${id}`, source: 'test', forkedFromRunId: parent, owner: null,
      session: { id: `ses_${id}`, createdAt: 1, lastSeq: 0, meta: null },
      commits: [], submission: null,
      run: { id, sessionId: `ses_${id}`, submissionId: null, kind: 'plan', state: 'completed', rootTaskId: null, transitionCount: 0, versions: {}, createdAt: 1, updatedAt: 2 },
      transitions: [], tasks: [], effects: [], entries: [], documents: [], snapshots: [], leases: [], egress: [], acceptance: [], costSamples: [], artifacts: [],
    });
    await t.store.importRun(rows('run_imported_fork', 'run_elsewhere'), 10);
    await t.store.importRun(rows('run_imported_original', null), 10);
    expect(await ids(t.store, 'run_elsewhere')).toEqual(['run_imported_fork']);
    expect(await ids(t.store, 'run_imported_original')).toEqual([]);
  });
});
