import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { DocumentTypes, HandlerRegistry, Kernel, submit, type TaskHandler } from '../../host/kernel';
import { exportRun, importRecord, recordRows, verifyRecord } from '../../host/record';
import type { ImportRows } from '../../host/store';
import type { Store } from '../../host/store';
import { systemClock } from '../../host/support';
import { startCountingService } from '../support/counting-service';
import { rawSql, STORE_KINDS, stopSharedPostgres, tempStoreOf } from '../support/store-kinds';
import { quietLogger } from '../support/temp-store';

afterAll(stopSharedPostgres, 60_000);

/**
 * A task kind as an application defines it: one `never` action keyed by a key the application
 * chooses (`deploy:RELEASE`, store-wide), a POST to the counting service. `uncertain` makes the
 * action throw after the request went out, as a connection reset after writing would.
 */
function deployKind(url: string, how: { uncertain: boolean }): TaskHandler {
  return {
    kind: 'deploy',
    version: 1,
    initialPhase: 'send',
    phases: {
      send: async (ctx) => {
        const { release } = ctx.input as { release: string };
        const out = await ctx.perform<{ answer: string }>({ id: `deploy:${release}`, kind: 'deploy', intent: { release }, replay: 'never' }, async (signal) => {
          const res = await fetch(`${url}/deploy`, { method: 'POST', signal });
          const answer = await res.text();
          if (how.uncertain) throw new Error('the connection was reset after the request was written');
          return { answer };
        });
        if (out.status === 'uncertain') return { type: 'interrupt', reason: out.reason };
        return { type: 'complete', result: { reused: out.reused } };
      },
    },
  };
}

/** Runs one deploy of `release` on `store` to its end with a kernel of its own. */
async function deploy(store: Store, url: string, release: string, how = { uncertain: false }, requestId = `req-${Math.random()}`) {
  const registry = new HandlerRegistry();
  registry.register(deployKind(url, how));
  const kernel = new Kernel({ store, registry, documents: new DocumentTypes(), clock: systemClock, logger: quietLogger(), hostId: `host-${release}`, pollMs: 20 });
  await kernel.start();
  try {
    const { run } = await submit({ store, kernel, registry }, { requestId, runKind: 'test', root: { kind: 'deploy', input: { release } } });
    return await kernel.waitForRun(run.id, { signal: AbortSignal.timeout(30_000), states: ['completed', 'failed', 'needs_reconciliation', 'cancelled'] });
  } finally {
    await kernel.stop();
  }
}

describe.each(STORE_KINDS)('an imported run is sealed off from live runs on %s', (kind) => {
  const open: Array<{ cleanup(): Promise<void> }> = [];
  afterEach(async () => {
    for (const t of open.splice(0)) await t.cleanup();
  });
  const storeOf = async () => {
    const t = await tempStoreOf(kind);
    open.push(t);
    return t.store;
  };

  it('a live run whose effect key equals an imported run\'s performs its own action, and the imported record stays as it was', async () => {
    const svc = await startCountingService();
    try {
      const exporter = await storeOf();
      const first = await deploy(exporter, svc.url, 'r7');
      expect(first.state).toBe('completed');
      expect(svc.counts().deploy).toBe(1);
      const { text } = await exportRun(exporter, first.id, 1_000);

      const importer = await storeOf();
      await importRecord(importer, text, 'r7.json', 2_000);
      const before = (await exportRun(importer, first.id, 3_000)).record.digest;
      const live = await deploy(importer, svc.url, 'r7');
      expect(live.state).toBe('completed');
      expect(svc.counts().deploy, 'the live run deployed itself: the imported receipt is another store\'s').toBe(2);
      const root = await importer.getTask(live.rootTaskId!);
      expect(root?.result).toEqual({ reused: false });
      const mine = await importer.getEffect('deploy:r7');
      expect(mine).toMatchObject({ runId: live.id, status: 'confirmed' });
      expect((await importer.listEffects({ runId: first.id })).map((e) => [e.id, e.status, e.runId])).toEqual([['deploy:r7', 'confirmed', first.id]]);
      expect((await exportRun(importer, first.id, 3_000)).record.digest).toBe(before);
    } finally {
      await svc.close();
    }
  });

  it('an uncertain imported effect is not taken over by a live run with the same key: the live run acts on its own, the imported record is unchanged', async () => {
    const svc = await startCountingService();
    try {
      const exporter = await storeOf();
      const first = await deploy(exporter, svc.url, 'r8', { uncertain: true });
      expect(first.state).toBe('needs_reconciliation');
      expect((await exporter.getEffect('deploy:r8'))?.status).toBe('unknown');
      const exported = await exportRun(exporter, first.id, 1_000);
      expect(exported.record.unresolved).toContainEqual(expect.objectContaining({ kind: 'effect', id: 'deploy:r8' }));

      const importer = await storeOf();
      await importRecord(importer, exported.text, 'r8.json', 2_000);
      const before = (await exportRun(importer, first.id, 3_000)).record.digest;
      const live = await deploy(importer, svc.url, 'r8');
      expect(live.state, 'the live run has no uncertainty of its own to reconcile').toBe('completed');
      expect(svc.counts().deploy).toBe(2);
      expect(await importer.getEffect('deploy:r8')).toMatchObject({ runId: live.id, status: 'confirmed', attempts: 1 });
      const imported = await importer.listEffects({ runId: first.id });
      expect(imported.map((e) => [e.id, e.status, e.runId, e.sessionId])).toEqual([['deploy:r8', 'unknown', first.id, first.sessionId]]);
      expect((await exportRun(importer, first.id, 3_000)).record.digest, 'the read-only record did not change').toBe(before);
    } finally {
      await svc.close();
    }
  });

  it('a live submission with the request id of an imported run\'s submission starts its own run, and the imported run keeps its submission', async () => {
    const svc = await startCountingService();
    try {
      const exporter = await storeOf();
      const first = await deploy(exporter, svc.url, 'r9', undefined, 'nightly-42');
      const { text } = await exportRun(exporter, first.id, 1_000);
      const importer = await storeOf();
      await importRecord(importer, text, 'r9.json', 2_000);
      const before = (await exportRun(importer, first.id, 3_000)).record.digest;
      const live = await deploy(importer, svc.url, 'r10', undefined, 'nightly-42');
      expect(live.id, 'not the imported run returned as the original submission').not.toBe(first.id);
      expect(live.state).toBe('completed');
      expect((await importer.findSubmission('nightly-42'))?.runId).toBe(live.id);
      expect((await importer.getSubmission(first.submissionId!))?.runId).toBe(first.id);
      expect((await exportRun(importer, first.id, 3_000)).record.digest).toBe(before);
    } finally {
      await svc.close();
    }
  });

  it('a store that imported runs before schema 18 moves their effects and submission out of the live tables when it opens', async () => {
    const svc = await startCountingService();
    try {
      const exporter = await storeOf();
      const first = await deploy(exporter, svc.url, 'r11', undefined, 'req-old');
      const { text } = await exportRun(exporter, first.id, 1_000);
      const t = await tempStoreOf(kind);
      open.push(t);
      await importRecord(t.store, text, 'r11.json', 2_000);
      // Attempts (schema 22) did not exist in the layout of schema 17: the record is the same but for them.
      // The contract's attempt ids come from those logs too.
      const withoutAttempts = (r: Awaited<ReturnType<typeof exportRun>>['record']) => ({
        ...r,
        digest: '',
        effects: r.effects.map((e) => ({ ...e, attemptLog: [] })),
        contract: r.contract && { ...r.contract, effectAttempts: r.contract.effectAttempts.map((e) => ({ ...e, attemptIds: [] })) },
      });
      const before = withoutAttempts((await exportRun(t.store, first.id, 3_000)).record);
      // The layout of schema 17: the imported rows in the live tables, under their keys.
      for (const sql of [
        `INSERT INTO effects (id, session_id, run_id, task_id, kind, intent_json, replay, status, attempts, receipt_json, error_json, created_at, updated_at)
           SELECT id, session_id, run_id, task_id, kind, intent_json, replay, status, attempts, receipt_json, error_json, created_at, updated_at FROM imported_effects`,
        'INSERT INTO submissions (id, session_id, request_id, run_id, input_json, created_at) SELECT id, session_id, request_id, run_id, input_json, created_at FROM imported_submissions',
        'DROP TABLE imported_effects',
        'DROP TABLE imported_submissions',
        'DROP TABLE imported_acceptance',
        'DELETE FROM schema_migrations WHERE version = 18',
        // Schema 22 (effect attempts) came after, and changes imported_effects too: rolled back with it.
        'ALTER TABLE effects DROP COLUMN attempts_json',
        'DROP TABLE effect_runs',
        'DROP INDEX egress_by_attempt',
        'ALTER TABLE egress_attempts DROP COLUMN attempt_id',
        'ALTER TABLE egress_attempts DROP COLUMN ended_at',
        'DELETE FROM schema_migrations WHERE version = 22',
      ]) await rawSql(t.store, sql);
      expect(await t.store.getEffect('deploy:r11'), 'the old layout: found by key').toBeDefined();
      const reopened = await t.open();
      expect(await reopened.getEffect('deploy:r11')).toBeUndefined();
      expect(await reopened.findSubmission('req-old')).toBeUndefined();
      expect(withoutAttempts((await exportRun(reopened, first.id, 3_000)).record)).toEqual(before);
    } finally {
      await svc.close();
    }
  });

  it('an import whose ids the store holds is import_conflict naming them, nothing written; an identical imported snapshot (a fork\'s copy of its parent\'s) is shared, a differing one collides', async () => {
    const svc = await startCountingService();
    try {
      const exporter = await storeOf();
      const first = await deploy(exporter, svc.url, 'r12');
      const rows = recordRows(verifyRecord((await exportRun(exporter, first.id, 1_000)).text), 'a:r12.json');
      const snap: ImportRows['snapshots'][number] = {
        id: 'snap_shared', runId: first.id, taskId: null, leaseId: 'lease_x', imageId: 'sha256:00', workspaceDigest: 'sha256:11', sizeBytes: 1,
        checkpoint: 'step:0:one', parentId: null, commitSeq: 1, createdAt: 1, prunedAt: null, registryRef: null, pushedAt: null,
      };
      /** The same rows under new session, run, submission (and, unless kept, task) ids, as another record would carry them. */
      const another = (n: string, o: { keepTasks?: boolean; snapshots: ImportRows['snapshots'] }): ImportRows => ({
        ...rows,
        session: { ...rows.session, id: `ses_${n}` },
        run: { ...rows.run, id: `run_${n}`, sessionId: `ses_${n}`, submissionId: `sub_${n}` },
        submission: rows.submission && { ...rows.submission, id: `sub_${n}`, sessionId: `ses_${n}`, runId: `run_${n}` },
        tasks: o.keepTasks ? rows.tasks : rows.tasks.map((t) => ({ ...t, id: `${t.id}_${n}` })),
        effects: rows.effects.map((e) => ({ ...e, taskId: o.keepTasks ? e.taskId : `${e.taskId}_${n}` })),
        snapshots: o.snapshots,
      });
      const importer = await storeOf();
      await importer.importRun({ ...rows, snapshots: [snap] }, 2_000);
      await importer.importRun(another('fork', { snapshots: [snap] }), 2_001);
      expect((await importer.getSnapshot('snap_shared'))?.sessionId, 'written once, by the first record').toBe(rows.session.id);

      const clash = importer.importRun(another('clash', { keepTasks: true, snapshots: [{ ...snap, prunedAt: 5 }] }), 2_002);
      const err = await clash.then(() => undefined, (e: unknown) => e as Error & { code?: string; details?: { collisions: Record<string, string[]> } });
      expect(err?.code).toBe('import_conflict');
      for (const t of rows.tasks) expect(err?.message).toContain(t.id);
      expect(err?.message).toContain('snap_shared');
      expect(err?.details?.collisions).toMatchObject({ task: rows.tasks.map((t) => t.id) });
      expect(await importer.getRun('run_clash'), 'nothing written').toBeUndefined();
      expect(await importer.getSession('ses_clash')).toBeUndefined();
      expect((await importer.listImportedRuns()).map((r) => r.runId).sort()).toEqual([first.id, 'run_fork'].sort());
    } finally {
      await svc.close();
    }
  });
});
