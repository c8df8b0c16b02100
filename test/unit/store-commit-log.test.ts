import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { rawSql, STORE_KINDS, stopSharedPostgres, tempStoreOf } from '../support/store-kinds';

afterAll(stopSharedPostgres, 60_000);

describe.each(STORE_KINDS)('the store-wide commit order on %s', (kind) => {
  let t: Awaited<ReturnType<typeof tempStoreOf>> | undefined;
  afterEach(async () => {
    await t?.cleanup();
    t = undefined;
  });

  it('numbers the commits of every session in the order they were committed, and a reader after N gets exactly the later ones', async () => {
    t = await tempStoreOf(kind);
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
    t = await tempStoreOf(kind);
    await t.store.commit({ sessionId: 'a', label: 'a1', createSession: {} });
    await t.store.commit({ sessionId: 'b', label: 'b1', createSession: {} });
    // The store as an older Berth left it: no commit order, schema version 11 (nor 20, which reshapes it).
    await rawSql(t.store, 'DROP TABLE commit_log');
    if (kind === 'postgres') await rawSql(t.store, 'DROP TABLE IF EXISTS commit_log_counter');
    await rawSql(t.store, 'DELETE FROM schema_migrations WHERE version IN (12, 20)');
    await t.store.close();
    const again = await t.open();
    expect((await again.listCommitLog()).map((c) => [c.seq, c.label])).toEqual([[1, 'a1'], [2, 'b1']]);
    await again.commit({ sessionId: 'a', label: 'a2' });
    expect((await again.listCommitLog({ afterSeq: 2 })).map((c) => [c.seq, c.label])).toEqual([[3, 'a2']]);
  });

  it('a reader following afterSeq while four hosts commit to their own sessions at once sees every number, each batch starting right after the last one it saw', async () => {
    t = await tempStoreOf(kind);
    const hosts = [t.store, await t.open(), await t.open(), await t.open()];
    const perHost = 25;
    await Promise.all(hosts.map((h, i) => h.commit({ sessionId: `s${i}`, label: 'init', createSession: {} })));
    const start = await t.store.lastCommitLogSeq();
    let done = false;
    const seen: number[] = [];
    const jumps: Array<{ after: number; got: number }> = [];
    const reader = (async () => {
      let last = start;
      for (;;) {
        const finished = done;
        for (const c of await t!.store.listCommitLog({ afterSeq: last })) {
          if (c.seq !== last + 1) jumps.push({ after: last, got: c.seq });
          seen.push(c.seq);
          last = c.seq;
        }
        if (finished) return;
        await new Promise((r) => setImmediate(r));
      }
    })();
    await Promise.all(hosts.map(async (h, i) => {
      for (let n = 0; n < perHost; n++) expect((await h.commit({ sessionId: `s${i}`, label: `c${n}` })).ok).toBe(true);
    }));
    done = true;
    await reader;
    expect(jumps).toEqual([]);
    expect(seen).toEqual(Array.from({ length: hosts.length * perHost }, (_, k) => start + k + 1));
  });

  it('pages entries newest first', async () => {
    t = await tempStoreOf(kind);
    await t.store.commit({ sessionId: 's', label: 'init', createSession: {} });
    for (let i = 0; i < 5; i++) await t.store.commit({ sessionId: 's', label: 'e', entries: [{ id: `e${i}`, kind: 'k', body: { i } }] });
    const first = await t.store.listEntriesNewest('s', { limit: 2 });
    expect(first.map((e) => (e.body as { i: number }).i)).toEqual([4, 3]);
    const next = await t.store.listEntriesNewest('s', { limit: 10, beforeSeq: first[1]!.seq });
    expect(next.map((e) => (e.body as { i: number }).i)).toEqual([2, 1, 0]);
  });
});

describe('the store-wide commit order on postgres, numbered by its readers', () => {
  it('a commit still in flight while a reader numbers the log gets a number above every number that reader saw, commits of other sessions do not wait for it', async () => {
    const t = await tempStoreOf('postgres');
    try {
      const s = t.store;
      await s.commit({ sessionId: 'a', label: 'a1', createSession: {} });
      await s.commit({ sessionId: 'b', label: 'b1', createSession: {} });
      // Session a's next commit, held open by another program between its writes and its COMMIT.
      const pool = (s as unknown as { pool: import('pg').Pool }).pool;
      const slow = await pool.connect();
      try {
        await slow.query('BEGIN');
        await slow.query("INSERT INTO commits (session_id, seq, at, label, actor) VALUES ('a', 2, 0, 'a2-slow', 'test')");
        await slow.query("INSERT INTO commit_log (session_id, session_seq) VALUES ('a', 2)");
        // Another session commits meanwhile, without waiting for the open one.
        expect((await s.commit({ sessionId: 'b', label: 'b2' })).ok).toBe(true);
        const seen = await s.listCommitLog();
        expect(seen.map((c) => [c.seq, c.label])).toEqual([[1, 'a1'], [2, 'b1'], [3, 'b2']]);
        await slow.query('COMMIT');
      } finally {
        slow.release();
      }
      expect((await s.listCommitLog({ afterSeq: 3 })).map((c) => [c.seq, c.label])).toEqual([[4, 'a2-slow']]);
      expect(await s.lastCommitLogSeq()).toBe(4);
      // The unnumbered rows are gone and no number repeats.
      expect(await rawSql(s, 'SELECT COUNT(*)::int AS n FROM commit_log WHERE seq IS NULL')).toEqual([{ n: 0 }]);
    } finally {
      await t.cleanup();
    }
  });
});
