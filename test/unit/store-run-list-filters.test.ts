import { afterAll, describe, expect, it } from 'vitest';
import { openPostgresStore, openSqliteStore, type Store } from '../../host/store';
import { newStoreLocation, STORE_KINDS, stopSharedPostgres, type StoreKind } from '../support/store-kinds';

afterAll(() => stopSharedPostgres());

// The runs list's tag filter and keyset paging, the same in both dialects (real SQLite, real PostgreSQL).

async function seeded(kind: StoreKind): Promise<{ store: Store; done(): Promise<void> }> {
  const loc = await newStoreLocation(kind);
  let now = 1_700_000_000_000;
  const clock = { now: () => now };
  const store = kind === 'sqlite' ? openSqliteStore(loc.location, { clock }) : await openPostgresStore(loc.location, { clock, dbClock: () => now });
  for (let i = 0; i < 30; i++) {
    // Pairs share a creation time: the id breaks the tie, in the order and in the cursor.
    now = 1_700_000_000_000 + Math.floor(i / 2) * 1000;
    const tags = [...(i % 2 === 0 ? ['even'] : []), ...(i % 3 === 0 ? ['three'] : []), ...(i === 7 ? ['it\'s "odd"%_'] : [])];
    await store.commit({ sessionId: `ses_${i}`, label: 'submit', createSession: { meta: { name: `r${i}`, ...(tags.length ? { tags } : {}) } }, runs: [{ id: `run_${String(i).padStart(2, '0')}`, kind: 'plan', submissionId: null, rootTaskId: null, versions: {} }] });
  }
  return { store, done: async () => (await store.close(), loc.cleanup()) };
}

describe.each(STORE_KINDS)('the runs list on %s', (kind) => {
  it('keeps only runs with every asked tag, pages oldest first by a creation-and-id cursor with no run twice or missed, and counts only when asked', async () => {
    const { store, done } = await seeded(kind);
    try {
      const ids = (rs: Array<{ id: string }>) => rs.map((r) => r.id);
      const want = (keep: (i: number) => boolean) => Array.from({ length: 30 }, (_, i) => i).filter(keep).map((i) => `run_${String(i).padStart(2, '0')}`);
      const even = await store.listRunPage({ tags: ['even'], order: 'created', limit: 100 });
      expect(ids(even.runs)).toEqual(want((i) => i % 2 === 0));
      expect(even.total).toBe(15);
      expect(even.runs[0]!.tags).toEqual(['even', 'three']);
      expect(ids((await store.listRunPage({ tags: ['even', 'three'], order: 'created', limit: 100 })).runs)).toEqual(want((i) => i % 6 === 0));
      // A tag is matched whole, quotes and LIKE characters included.
      expect(ids((await store.listRunPage({ tags: ['it\'s "odd"%_'], limit: 100 })).runs)).toEqual(['run_07']);
      expect(ids((await store.listRunPage({ tags: ['odd'], limit: 100 })).runs)).toEqual([]);
      // Seven at a time after the last one's (creation, id).
      const seen: string[] = [];
      let after: { createdAt: number; id: string } | undefined;
      for (;;) {
        const page = await store.listRunPage({ order: 'created', after, limit: 7, count: false });
        expect(page.total).toBe(-1);
        seen.push(...ids(page.runs));
        if (page.runs.length < 7) break;
        after = { createdAt: page.runs.at(-1)!.createdAt, id: page.runs.at(-1)!.id };
      }
      expect(seen).toEqual(want(() => true));
    } finally {
      await done();
    }
  });
});
