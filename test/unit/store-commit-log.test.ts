import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { tempStore } from '../support/temp-store';

let t: ReturnType<typeof tempStore> | undefined;
afterEach(async () => {
  await t?.cleanup();
  t = undefined;
});

describe('the store-wide commit order', () => {
  it('numbers the commits of every session in the order they were committed, and a reader after N gets exactly the later ones', async () => {
    t = tempStore();
    const s = t.store;
    await s.commit({ sessionId: 'a', label: 'a1', createSession: {} });
    await s.commit({ sessionId: 'b', label: 'b1', createSession: {} });
    await s.commit({ sessionId: 'a', label: 'a2', actor: 'user:x' });
    await s.commit({ sessionId: 'b', label: 'b2' });
    const all = await s.listCommitLog();
    expect(all.map((c) => [c.seq, c.sessionId, c.sessionSeq, c.label])).toEqual([[1, 'a', 1, 'a1'], [2, 'b', 1, 'b1'], [3, 'a', 2, 'a2'], [4, 'b', 2, 'b2']]);
    expect(all[2]!.actor).toBe('user:x');
    expect(await s.lastCommitLogSeq()).toBe(4);
    expect((await s.listCommitLog({ afterSeq: 2 })).map((c) => c.label)).toEqual(['a2', 'b2']);
    expect((await s.listCommitLog({ afterSeq: 0, sessionId: 'b' })).map((c) => c.label)).toEqual(['b1', 'b2']);
    expect((await s.listCommitLog({ afterSeq: 0, limit: 1 })).map((c) => c.label)).toEqual(['a1']);
  });

  it('numbers the commits a store had before the migration by time, and goes on after them', async () => {
    t = tempStore();
    await t.store.commit({ sessionId: 'a', label: 'a1', createSession: {} });
    await t.store.commit({ sessionId: 'b', label: 'b1', createSession: {} });
    await t.store.close();
    // The store as an older Berth left it: no commit_log, schema version 11.
    const db = new Database(t.path);
    db.exec('DROP TABLE commit_log; DELETE FROM schema_migrations WHERE version = 12;');
    db.close();
    const { openSqliteStore } = await import('../../host/store');
    const again = openSqliteStore(t.path);
    try {
      expect((await again.listCommitLog()).map((c) => [c.seq, c.label])).toEqual([[1, 'a1'], [2, 'b1']]);
      await again.commit({ sessionId: 'a', label: 'a2' });
      expect((await again.listCommitLog({ afterSeq: 2 })).map((c) => [c.seq, c.label])).toEqual([[3, 'a2']]);
    } finally {
      await again.close();
    }
  });

  it('pages entries newest first', async () => {
    t = tempStore();
    await t.store.commit({ sessionId: 's', label: 'init', createSession: {} });
    for (let i = 0; i < 5; i++) await t.store.commit({ sessionId: 's', label: 'e', entries: [{ id: `e${i}`, kind: 'k', body: { i } }] });
    const first = await t.store.listEntriesNewest('s', { limit: 2 });
    expect(first.map((e) => (e.body as { i: number }).i)).toEqual([4, 3]);
    const next = await t.store.listEntriesNewest('s', { limit: 10, beforeSeq: first[1]!.seq });
    expect(next.map((e) => (e.body as { i: number }).i)).toEqual([2, 1, 0]);
  });
});
