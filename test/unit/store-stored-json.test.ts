import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isBerthError } from '../../host/errors';
import { rawSql, STORE_KINDS, stopSharedPostgres, tempStoreOf } from '../support/store-kinds';

afterAll(stopSharedPostgres, 60_000);

describe.each(STORE_KINDS)('stored JSON decoded at read time on %s', (kind) => {
  let t: Awaited<ReturnType<typeof tempStoreOf>>;
  beforeEach(async () => {
    t = await tempStoreOf(kind);
    const r = await t.store.commit({
      sessionId: 'ses_1',
      label: 'submit',
      createSession: {},
      runs: [{ id: 'run_1', kind: 'plan', submissionId: null, rootTaskId: 'task_1', versions: { kernel: 'berth@0.1.0' } }],
      tasks: [{ id: 'task_1', runId: 'run_1', parentId: null, kind: 'k', kindVersion: 1, phase: 'p', input: { n: 1 } }],
      effects: [{ id: 'fx_1', create: { runId: 'run_1', taskId: 'task_1', kind: 'http', intent: { url: 'x' }, replay: 'never' } }],
    });
    expect(r.ok).toBe(true);
  }, 60_000);
  afterEach(async () => {
    await t.cleanup();
  });

  /** The error a read throws, checked to name the table, the row and the field. */
  async function corrupt(read: () => Promise<unknown>, where: { table: string; rowId: string; field: string }) {
    const err = await read().then(() => null, (e: unknown) => e);
    expect(isBerthError(err, 'store_row_invalid')).toBe(true);
    expect((err as { details: unknown }).details).toMatchObject(where);
    expect((err as Error).message).toContain(`${where.table} row ${where.rowId}`);
    expect((err as Error).message).toContain(where.field);
  }

  it('reads back what commits wrote, unchanged', async () => {
    expect(await t.store.getTask('task_1')).toMatchObject({ input: { n: 1 }, checkpoint: null, wait: null, error: null, result: null });
    expect((await t.store.getRun('run_1'))!.versions).toEqual({ kernel: 'berth@0.1.0' });
    expect(await t.store.getEffect('fx_1')).toMatchObject({ intent: { url: 'x' }, receipt: null, error: null });
  });

  it('a task whose stored wait is not a wait spec is a typed error naming tasks, the task id and wait_json', async () => {
    await rawSql(t.store, `UPDATE tasks SET wait_json = '{"join":"sometimes","children":[],"phase":"p"}' WHERE id = 'task_1'`);
    await corrupt(() => t.store.getTask('task_1'), { table: 'tasks', rowId: 'task_1', field: 'wait_json' });
    await corrupt(() => t.store.listTasks({ runId: 'run_1' }), { table: 'tasks', rowId: 'task_1', field: 'wait_json' });
  });

  it('a task whose stored error lacks its code is a typed error naming error_json', async () => {
    await rawSql(t.store, `UPDATE tasks SET error_json = '{"message":"m"}' WHERE id = 'task_1'`);
    await corrupt(() => t.store.getTask('task_1'), { table: 'tasks', rowId: 'task_1', field: 'error_json' });
  });

  it('a run whose stored versions are not versions is a typed error naming runs, the run id and versions_json', async () => {
    await rawSql(t.store, `UPDATE runs SET versions_json = '{"kernel":5}' WHERE id = 'run_1'`);
    await corrupt(() => t.store.getRun('run_1'), { table: 'runs', rowId: 'run_1', field: 'versions_json' });
  });

  it('an effect whose stored receipt is not JSON at all is a typed error naming effects, the effect id and receipt_json', async () => {
    await rawSql(t.store, `UPDATE effects SET receipt_json = 'not json' WHERE id = 'fx_1'`);
    await corrupt(() => t.store.getEffect('fx_1'), { table: 'effects', rowId: 'fx_1', field: 'receipt_json' });
  });

  it('a run transition whose stored versions do not parse stops a commit that carries them over, naming the run', async () => {
    await rawSql(t.store, `UPDATE runs SET versions_json = '[1]' WHERE id = 'run_1'`);
    const err = await t.store
      .commit({ sessionId: 'ses_1', label: 'go', runTransitions: [{ runId: 'run_1', from: 'admitted', to: 'running', actor: 'a', reason: 'go' }] })
      .then(() => null, (e: unknown) => e);
    expect(isBerthError(err, 'store_row_invalid')).toBe(true);
    expect((err as { details: unknown }).details).toMatchObject({ table: 'runs', rowId: 'run_1', field: 'versions_json' });
    expect((await t.store.getSession('ses_1'))!.lastSeq).toBe(1);
  });
});
