import { afterAll, describe, expect, it } from 'vitest';
import type { Page, Store } from '../../host/store';
import { STORE_KINDS, stopSharedPostgres, freshStores } from '../support/store-kinds';

afterAll(stopSharedPostgres, 60_000);

const N = 23;

/** A run of N steps, each committing a task, an effect and a snapshot, as a plan run commits them. */
async function longRun(store: Store) {
  await store.commit({
    sessionId: 'ses_p',
    label: 'start',
    createSession: {},
    runs: [{ id: 'run_p', kind: 'test', submissionId: null, rootTaskId: 'root', versions: { kernel: '0.1.0' } }],
    tasks: [{ id: 'root', runId: 'run_p', parentId: null, kind: 'job', kindVersion: 1, phase: 'step', input: {} }],
  });
  for (let i = 0; i < N; i++) {
    const n = String(i).padStart(3, '0');
    await store.commit({
      sessionId: 'ses_p',
      label: 'step',
      tasks: [{ id: `task_${n}`, runId: 'run_p', parentId: 'root', kind: 'step', kindVersion: 1, phase: 'run', input: { i } }],
      effects: [{ id: `eff_${n}`, create: { runId: 'run_p', taskId: `task_${n}`, kind: 'plan.step', intent: { i }, replay: 'safe' } }],
      snapshots: [{ id: `snap_${n}`, runId: 'run_p', taskId: `task_${n}`, leaseId: 'lease_1', imageId: 'sha256:x', workspaceDigest: 'sha256:y', sizeBytes: 0, checkpoint: `step:${i}`, parentId: null }],
    });
  }
}

/** Every page of `size` read one after the other, until a short page. */
async function allPages<T>(read: (page: Page) => Promise<T[]>, size: number): Promise<T[][]> {
  const out: T[][] = [];
  for (let offset = 0; ; offset += size) {
    const rows = await read({ offset, limit: size });
    out.push(rows);
    if (rows.length < size) return out;
  }
}

describe.each(STORE_KINDS)('pages of a long run\'s lists, on %s', (kind) => {
  const fresh = freshStores(kind);

  it('answers tasks, effects, snapshots and commits page by page in the whole list\'s order, each page no longer than asked', async () => {
    const t = await fresh();
    const store = t.store;
    await longRun(store);
    const ids = <T extends { id: string }>(pages: T[][]) => pages.flat().map((x) => x.id);
    const tasks = await allPages((page) => store.listTasks({ runId: 'run_p', page }), 5);
    expect(tasks.map((p) => p.length)).toEqual([5, 5, 5, 5, 4]);
    expect(ids(tasks)).toEqual((await store.listTasks({ runId: 'run_p' })).map((x) => x.id));
    const effects = await allPages((page) => store.listEffects({ runId: 'run_p', earlier: true, page }), 4);
    expect(Math.max(...effects.map((p) => p.length))).toBe(4);
    expect(ids(effects)).toEqual((await store.listEffects({ runId: 'run_p', earlier: true })).map((x) => x.id));
    const snaps = await allPages((page) => store.listSnapshots({ runId: 'run_p', page }), 6);
    expect(ids(snaps)).toEqual((await store.listSnapshots({ runId: 'run_p' })).map((x) => x.id));
    const bySession = await allPages((page) => store.listSnapshots({ sessionId: 'ses_p', page }), 6);
    expect(ids(bySession)).toEqual(ids(snaps));
    const commits = [];
    for (let after = 0; ; ) {
      const page = await store.listCommits('ses_p', after, 7);
      expect(page.length).toBeLessThanOrEqual(7);
      commits.push(...page);
      if (page.length < 7) break;
      after = page.at(-1)!.seq;
    }
    expect(commits.map((c) => c.seq)).toEqual((await store.listCommits('ses_p')).map((c) => c.seq));
    expect(commits).toHaveLength(N + 1);
  });
});
