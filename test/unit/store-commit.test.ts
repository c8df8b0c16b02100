import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CommitInput } from '../../host/store';
import { isBerthError } from '../../host/errors';
import { MIGRATIONS } from '../../host/store/sqlite/migrations';
import { rawSql, STORE_KINDS, stopSharedPostgres, tempStoreOf } from '../support/store-kinds';

afterAll(stopSharedPostgres, 60_000);

describe.each(STORE_KINDS)('store commit on %s', (kind) => {
let t: Awaited<ReturnType<typeof tempStoreOf>>;
beforeEach(async () => {
  t = await tempStoreOf(kind);
}, 60_000);
afterEach(async () => {
  await t.cleanup();
});

const session = 'ses_1';
const base = (extra: Partial<CommitInput> = {}): CommitInput => ({ sessionId: session, label: 'test', ...extra });

async function seed() {
  const r = await t.store.commit(
    base({
      createSession: {},
      runs: [{ id: 'run_1', kind: 'plan', submissionId: null, rootTaskId: 'task_1', versions: { kernel: '0.1.0' } }],
      tasks: [{ id: 'task_1', runId: 'run_1', parentId: null, kind: 'k', kindVersion: 1, phase: 'start', input: { n: 1 } }],
    }),
  );
  expect(r.ok).toBe(true);
}

async function counts() {
  const n = async (table: string) => Number((await rawSql(t.store, `SELECT COUNT(*) AS c FROM ${table}`))[0]!.c);
  return { commits: await n('commits'), entries: await n('entries'), tasks: await n('tasks'), effects: await n('effects'), transitions: await n('run_transitions'), docs: await n('document_ops') };
}

  it('keeps the environment fingerprint and image digest in force when a later transition names only the kernel (issue 17: the export showed them lost after admission)', async () => {
    const r = await t.store.commit(
      base({ createSession: {}, runs: [{ id: 'run_v', kind: 'plan', submissionId: null, rootTaskId: null, versions: { kernel: 'berth@0.1.0', envFingerprint: 'sha256:env', imageDigest: 'sha256:img' } }] }),
    );
    expect(r.ok).toBe(true);
    await t.store.commit(base({ runTransitions: [{ runId: 'run_v', from: 'admitted', to: 'running', actor: 'host:a', reason: 'go', versions: { kernel: 'berth@0.1.0' } }] }));
    const [, second] = await t.store.listRunTransitions('run_v');
    expect(second!.versions).toEqual({ kernel: 'berth@0.1.0', envFingerprint: 'sha256:env', imageDigest: 'sha256:img' });
    expect((await t.store.getRun('run_v'))!.versions).toEqual({ kernel: 'berth@0.1.0', envFingerprint: 'sha256:env', imageDigest: 'sha256:img' });
  });

  it('numbers commits per session in one monotonic sequence', async () => {
    await seed();
    const seqs: number[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await t.store.commit(base({ entries: [{ id: `e${i}`, kind: 'note', body: i }] }));
      if (r.ok) seqs.push(r.seq);
    }
    expect(seqs).toEqual([2, 3, 4, 5, 6]);
    expect((await t.store.getSession(session))?.lastSeq).toBe(6);
    await t.store.commit({ sessionId: 'ses_2', label: 'other', createSession: {} });
    expect((await t.store.getSession('ses_2'))?.lastSeq).toBe(1);
  });

  it('writes nothing when a commit throws in the middle (illegal run transition after entries and effects)', async () => {
    await seed();
    const before = await counts();
    await expect(
      t.store.commit(
        base({
          entries: [{ id: 'e1', kind: 'note', body: 'x' }],
          documentOps: [{ documentId: 'd1', create: { type: 'plan', runId: 'run_1', initial: {} }, expectVersion: 0, op: null }],
          effects: [{ id: 'fx1', create: { runId: 'run_1', taskId: 'task_1', kind: 'http', intent: { a: 1 }, replay: 'never' } }],
          taskTransitions: [{ taskId: 'task_1', expectVersion: 1, set: { status: 'running' } }],
          runTransitions: [{ runId: 'run_1', from: 'admitted', to: 'completed', actor: 't', reason: 'bad' }],
        }),
      ),
    ).rejects.toSatisfy((e) => isBerthError(e, 'illegal_run_transition'));
    expect(await counts()).toEqual(before);
    expect((await t.store.getTask('task_1'))?.status).toBe('pending');
    expect((await t.store.getSession(session))?.lastSeq).toBe(1);
  });

  it('a commit whose later write fails reports that write\'s own error (not an aborted-transaction echo) and writes nothing', async () => {
    await seed();
    const before = await counts();
    const err = await t.store
      .commit(base({ entries: [{ id: 'same', kind: 'note', body: 1 }, { id: 'same', kind: 'note', body: 2 }], tasks: [{ id: 'task_2', runId: 'run_1', parentId: null, kind: 'k', kindVersion: 1, phase: 'p', input: {} }] }))
      .then(() => null, (e: unknown) => e as Error);
    expect(err?.message).toMatch(/unique/i);
    expect(err?.message).not.toMatch(/aborted/i);
    expect(await counts()).toEqual(before);
    expect((await t.store.commit(base({ entries: [{ id: 'same', kind: 'note', body: 3 }] }))).ok).toBe(true);
  });

  it('rejects a transition by a worker that no longer owns the task, writing nothing', async () => {
    await seed();
    const first = await t.store.commit(base({ taskTransitions: [{ taskId: 'task_1', expectVersion: 1, set: { status: 'running' } }] }));
    expect(first.ok).toBe(true);
    const before = await counts();
    const stale = await t.store.commit(
      base({
        entries: [{ id: 'late', kind: 'note', body: 'stale worker' }],
        taskTransitions: [{ taskId: 'task_1', expectVersion: 1, set: { status: 'terminal', outcome: 'ok' } }],
      }),
    );
    expect(stale).toEqual({ ok: false, conflict: { kind: 'task_version', taskId: 'task_1', expected: 1, actual: 2 } });
    expect(await counts()).toEqual(before);
    expect((await t.store.getTask('task_1'))?.status).toBe('running');
  });

  it('rejects a commit fenced with an epoch another host has replaced (an operator take-over of a live session)', async () => {
    await seed();
    const old = await t.store.claimSession(session, { hostId: 'host-a', pid: 1 }, 60_000);
    const now = await t.store.claimSession(session, { hostId: 'host-b', pid: 2 }, 60_000, { takeOver: true });
    expect(old).toMatchObject({ ok: true, epoch: 1 });
    expect(now).toMatchObject({ ok: true, epoch: 2 });
    const scope = `session:${session}`;
    const r = await t.store.commit(base({ fence: { scope, epoch: 1 }, entries: [{ id: 'x', kind: 'n', body: 1 }] }));
    expect(r).toEqual({ ok: false, conflict: { kind: 'fence', scope, expected: 1, actual: 2, reason: 'taken' } });
    expect((await t.store.commit(base({ fence: { scope, epoch: 2 } }))).ok).toBe(true);
  });

  it('compare-and-sets run state and logs every transition with actor, reason and versions', async () => {
    await seed();
    await t.store.commit(base({ runTransitions: [{ runId: 'run_1', from: 'admitted', to: 'running', actor: 'host:a', reason: 'go', versions: { kernel: '0.1.0', envFingerprint: 'sha256:ab' } }] }));
    const lost = await t.store.commit(base({ runTransitions: [{ runId: 'run_1', from: 'admitted', to: 'running', actor: 'host:b', reason: 'dup' }] }));
    expect(lost.ok).toBe(false);
    const log = await t.store.listRunTransitions('run_1');
    expect(log.map((l) => [l.n, l.from, l.to, l.actor, l.reason])).toEqual([
      [1, null, 'admitted', 'host', 'submitted'],
      [2, 'admitted', 'running', 'host:a', 'go'],
    ]);
    expect(log[1]!.versions).toEqual({ kernel: '0.1.0', envFingerprint: 'sha256:ab' });
    expect(log[1]!.commitSeq).toBe(2);
  });

  it('refuses to complete a run while one of its effects is unresolved', async () => {
    await seed();
    await t.store.commit(base({
      runTransitions: [{ runId: 'run_1', from: 'admitted', to: 'running', actor: 'a', reason: 'go' }],
      effects: [{ id: 'fx1', create: { runId: 'run_1', taskId: 'task_1', kind: 'mail', intent: { to: 'a' }, replay: 'never' }, set: { status: 'executing' } }],
    }));
    const r = await t.store.commit(base({ runTransitions: [{ runId: 'run_1', from: 'running', to: 'completed', actor: 'a', reason: 'done' }] }));
    expect(r).toEqual({ ok: false, conflict: { kind: 'unresolved_effects', runId: 'run_1', effectIds: ['fx1'] } });
    const ok = await t.store.commit(base({
      effects: [{ id: 'fx1', expectStatus: 'executing', set: { status: 'confirmed', receipt: { id: 'm1' } } }],
      runTransitions: [{ runId: 'run_1', from: 'running', to: 'completed', actor: 'a', reason: 'done' }],
    }));
    expect(ok.ok).toBe(true);
    expect((await t.store.getEffect('fx1'))?.receipt).toEqual({ id: 'm1' });
  });

  it('keeps entries immutable at the database level', async () => {
    await seed();
    await t.store.commit(base({ entries: [{ id: 'e1', kind: 'user', body: 'hello' }] }));
    await expect(rawSql(t.store, "UPDATE entries SET body_json = '\"changed\"'")).rejects.toThrow(/immutable/);
    await expect(rawSql(t.store, 'DELETE FROM entries')).rejects.toThrow(/immutable/);
    expect((await t.store.listEntries(session)).map((e) => e.body)).toEqual(['hello']);
  });

  it('refuses to create an effect again with a different intent', async () => {
    await seed();
    const create = (intent: unknown) =>
      t.store.commit(base({ effects: [{ id: 'fx', create: { runId: 'run_1', taskId: 'task_1', kind: 'k', intent: intent as never, replay: 'safe' } }] }));
    expect((await create({ a: 1 })).ok).toBe(true);
    expect((await create({ a: 1 })).ok).toBe(true);
    expect(await create({ a: 2 })).toEqual({ ok: false, conflict: { kind: 'effect_intent', effectId: 'fx' } });
  });

  it('two hosts committing to one session at once get one gap-free sequence, and only one wins a task compare-and-set', async () => {
    await seed();
    const other = await t.open();
    const hosts = [t.store, other];
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) => hosts[i % 2]!.commit(base({ entries: [{ id: `c${i}`, kind: 'note', body: i }] }))),
    );
    const seqs = results.map((r) => (r.ok ? r.seq : -1)).sort((a, b) => a - b);
    expect(seqs).toEqual(Array.from({ length: 40 }, (_, i) => i + 2));
    expect((await t.store.listEntries(session)).map((e) => e.seq)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    const race = await Promise.all(
      hosts.map((h, i) => h.commit(base({ entries: [{ id: `race${i}`, kind: 'note', body: i }], taskTransitions: [{ taskId: 'task_1', expectVersion: 1, set: { status: 'running' } }] }))),
    );
    expect(race.filter((r) => r.ok)).toHaveLength(1);
    expect(race.find((r) => !r.ok)).toMatchObject({ ok: false, conflict: { kind: 'task_version', taskId: 'task_1', expected: 1, actual: 2 } });
    expect((await t.store.listEntries(session)).filter((e) => String(e.id).startsWith('race'))).toHaveLength(1);
  });

  it('two hosts submitting the same request at once: one run is admitted, the other gets duplicate_request', async () => {
    const other = await t.open();
    const submit = (h: typeof other, n: number) =>
      h.commit({
        sessionId: `ses_dup${n}`,
        label: 'submit',
        createSession: {},
        submissions: [{ id: `sub_${n}`, requestId: 'req-1', runId: `run_${n}`, input: {} }],
        runs: [{ id: `run_${n}`, kind: 'plan', submissionId: `sub_${n}`, rootTaskId: null, versions: {} }],
      });
    const [a, b] = await Promise.all([submit(t.store, 1), submit(other, 2)]);
    const lost = a.ok ? b : a;
    expect([a.ok, b.ok].filter(Boolean)).toHaveLength(1);
    expect(lost).toMatchObject({ ok: false, conflict: { kind: 'duplicate_request', requestId: 'req-1' } });
    expect(await t.store.listRuns()).toHaveLength(1);
  });

  it('survives reopening: migrations are recorded once and data is kept', async () => {
    await seed();
    await t.store.close();
    const again = await t.open();
    expect((await again.getTask('task_1'))?.input).toEqual({ n: 1 });
    const versions = (await rawSql(again, 'SELECT version FROM schema_migrations ORDER BY version')).map((r) => Number(r.version));
    expect(versions).toEqual(MIGRATIONS.map((m) => m.version));
    if (kind === 'sqlite') {
      const db = (again as unknown as { db: import('better-sqlite3').Database }).db;
      expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
      expect(db.pragma('synchronous', { simple: true })).toBe(2);
    } else {
      // An intent must be durable before its action: the server flushes WAL before COMMIT returns.
      expect((await rawSql(again, 'SHOW synchronous_commit'))[0]!.synchronous_commit).toBe('on');
    }
  });
});
