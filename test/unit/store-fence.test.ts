import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { isBerthError } from '../../host/errors';
import { openPostgresStore, openSqliteStore, type CommitInput, type Store } from '../../host/store';
import { newStoreLocation, rawSql, STORE_KINDS, stopSharedPostgres, type StoreKind } from '../support/store-kinds';

afterAll(stopSharedPostgres, 60_000);

let cleanup: (() => Promise<void>) | undefined;
afterEach(async () => {
  await cleanup?.();
  cleanup = undefined;
});

/**
 * Two store handles on one store (two hosts) on one settable clock standing in for the database
 * clock (SQLite's store clock; PostgreSQL's `dbClock`), with session `ses_1` created (unfenced).
 */
async function twoHosts(kind: StoreKind) {
  const loc = await newStoreLocation(kind);
  let now = 1_000_000;
  const clock = { now: () => now };
  const open = async (): Promise<Store> => (kind === 'sqlite' ? openSqliteStore(loc.location, { clock }) : openPostgresStore(loc.location, { clock, dbClock: () => now }));
  const a = await open();
  const b = await open();
  cleanup = async () => (await a.close(), await b.close(), loc.cleanup());
  await a.commit({ sessionId: 'ses_1', label: 'submit', createSession: {}, tasks: [{ id: 'task_1', runId: null, parentId: null, kind: 'k', kindVersion: 1, phase: 'p', input: {} }] });
  return { a, b, advance: (ms: number) => (now += ms) };
}

const step = (epoch: number, n: number, scope = 'session:ses_1'): CommitInput => ({
  sessionId: 'ses_1',
  label: 'step',
  fence: { scope, epoch },
  entries: [{ id: `e${n}`, kind: 'note', body: n }],
});
const refused = (reason: string, expected: number, actual: number | null) => ({ ok: false, conflict: { kind: 'fence', scope: 'session:ses_1', expected, actual, reason } });

describe.each(STORE_KINDS)('the session fence of every commit on %s', (kind) => {
  it('a commit fenced by the live owner passes, and one renewal keeps it passing past the first lease', async () => {
    const { a, advance } = await twoHosts(kind);
    const claim = await a.claimSession('ses_1', { hostId: 'h', pid: 1 }, 3000);
    expect(claim).toMatchObject({ ok: true, epoch: 1 });
    expect((await a.commit(step(1, 1))).ok).toBe(true);
    advance(3000); // exactly at lease_until: still live (the lease holds until and including it)
    expect((await a.commit(step(1, 2))).ok).toBe(true);
    expect(await a.renewSession('ses_1', 1, 3000)).toBe(true);
    advance(2000);
    expect((await a.commit(step(1, 3))).ok).toBe(true);
  });

  it('a fenced commit is refused as expired once the lease ran out though nobody claimed the session, writes nothing, and the lapsed owner cannot renew its way back', async () => {
    const { a, advance } = await twoHosts(kind);
    await a.claimSession('ses_1', { hostId: 'h', pid: 1 }, 3000);
    advance(3001);
    const before = (await a.getSession('ses_1'))!.lastSeq;
    expect(await a.commit(step(1, 1))).toEqual(refused('expired', 1, 1));
    expect((await a.getSession('ses_1'))!.lastSeq).toBe(before);
    expect(await a.listEntries('ses_1')).toEqual([]);
    expect(await a.renewSession('ses_1', 1, 3000)).toBe(false);
    expect(await a.commit(step(1, 2))).toEqual(refused('expired', 1, 1));
    expect((await a.getSessionOwner('ses_1'))!.leaseUntil).toBe(1_000_000 + 3000);
  });

  it('a fenced commit is refused as taken once another host claimed the session', async () => {
    const { a, b, advance } = await twoHosts(kind);
    await a.claimSession('ses_1', { hostId: 'h', pid: 1 }, 3000);
    advance(3001);
    expect(await b.claimSession('ses_1', { hostId: 'h', pid: 2 }, 3000)).toMatchObject({ ok: true, epoch: 2 });
    expect(await a.commit(step(1, 1))).toEqual(refused('taken', 1, 2));
    expect((await b.commit(step(2, 2))).ok).toBe(true);
  });

  it('a fenced commit is refused as released once its owner released the session, and a released lease cannot be renewed', async () => {
    const { a } = await twoHosts(kind);
    await a.claimSession('ses_1', { hostId: 'h', pid: 1 }, 60_000);
    expect(await a.releaseSession('ses_1', 1)).toBe(true);
    expect(await a.commit(step(1, 1))).toEqual(refused('released', 1, 1));
    expect(await a.renewSession('ses_1', 1, 60_000)).toBe(false);
  });

  it('a fenced commit of a session nobody ever claimed is refused as missing, also when the commit would create it', async () => {
    const { a } = await twoHosts(kind);
    expect(await a.commit(step(1, 1))).toEqual(refused('missing', 1, null));
    const create = await a.commit({ sessionId: 'ses_new', label: 'submit', createSession: {}, fence: { scope: 'session:ses_new', epoch: 1 } });
    expect(create).toEqual({ ok: false, conflict: { kind: 'fence', scope: 'session:ses_new', expected: 1, actual: null, reason: 'missing' } });
    expect(await a.getSession('ses_new')).toBeUndefined();
  });

  it('a fence whose scope is not the commit\'s own session is bad_commit naming both, even while that scope\'s epoch is current', async () => {
    const { a } = await twoHosts(kind);
    await a.claimSession('ses_2', { hostId: 'h', pid: 1 }, 60_000);
    // `kernel` was the scope of the store-wide right, which no longer exists.
    for (const scope of ['kernel', 'session:ses_2']) {
      const err = await a.commit(step(1, 1, scope)).then(() => null, (e: unknown) => e);
      expect(isBerthError(err, 'bad_commit')).toBe(true);
      expect((err as Error).message).toContain(scope);
      expect((err as Error).message).toContain('session:ses_1');
    }
    expect(await a.listEntries('ses_1')).toEqual([]);
  });
});

describe('the session fence on PostgreSQL reads the server clock, never the host\'s', () => {
  const HOUR = 3_600_000;
  async function skewed(skewMs: number) {
    const loc = await newStoreLocation('postgres');
    const store = await openPostgresStore(loc.location, { clock: { now: () => Date.now() + skewMs } });
    cleanup = async () => (await store.close(), loc.cleanup());
    await store.commit({ sessionId: 'ses_1', label: 'submit', createSession: {} });
    return store;
  }

  it('a host whose clock runs an hour behind has its commit refused once the server says the lease ran out, and cannot renew it', async () => {
    const store = await skewed(-HOUR);
    const claim = await store.claimSession('ses_1', { hostId: 'h', pid: 1 }, 200);
    expect(claim.ok).toBe(true);
    const until = (await store.getSessionOwner('ses_1'))!.leaseUntil;
    while ((await store.databaseNow()) <= until) await new Promise((r) => setTimeout(r, 50));
    expect(await store.commit(step(1, 1))).toEqual(refused('expired', 1, 1));
    expect(await store.renewSession('ses_1', 1, 60_000)).toBe(false);
  });

  it('a host whose clock runs an hour ahead still commits inside the lease the server granted', async () => {
    const store = await skewed(HOUR);
    expect((await store.claimSession('ses_1', { hostId: 'h', pid: 1 }, 60_000)).ok).toBe(true);
    expect((await store.commit(step(1, 1))).ok).toBe(true);
    expect(await store.renewSession('ses_1', 1, 60_000)).toBe(true);
    expect((await store.commit(step(1, 2))).ok).toBe(true);
  });
});
