import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { openPostgresStore, openSqliteStore, type Store } from '../../host/store';
import { newStoreLocation, rawSql, STORE_KINDS, stopSharedPostgres, type StoreKind } from '../support/store-kinds';

afterAll(stopSharedPostgres, 60_000);

let cleanup: (() => void) | undefined;
afterEach(() => {
  cleanup?.();
  cleanup = undefined;
});

/**
 * Two store handles on one store (two host processes), on one settable clock standing in for the
 * database clock (SQLite's store clock; PostgreSQL's `dbClock`, which replaces the server's).
 */
async function twoHosts(kind: StoreKind, opts: { serverClock?: boolean } = {}) {
  const loc = await newStoreLocation(kind);
  cleanup = loc.cleanup;
  let now = 1_000_000;
  const clock = { now: () => now };
  const open = async (): Promise<Store> =>
    kind === 'sqlite' ? openSqliteStore(loc.location, { clock }) : openPostgresStore(loc.location, opts.serverClock ? {} : { clock, dbClock: () => now });
  const a = await open();
  const b = await open();
  return { a, b, advance: (ms: number) => (now += ms), close: async () => (await a.close(), await b.close()) };
}

describe.each(STORE_KINDS)('run ownership in the store on %s', (kind) => {
  it('a claim is refused while the owner\'s lease is live, taken after it ran out with a new epoch, and the old owner\'s commits and renewals are then refused', async () => {
    const { a, b, advance, close } = await twoHosts(kind);
    await a.commit({ sessionId: 'ses_1', label: 'submit', createSession: {} });
    const first = await a.claimSession('ses_1', { hostId: 'h', pid: 1 }, 3000);
    expect(first).toMatchObject({ ok: true, epoch: 1 });
    const fence = { scope: 'session:ses_1', epoch: 1 };
    expect((await a.commit({ sessionId: 'ses_1', label: 'step', fence })).ok).toBe(true);

    const early = await b.claimSession('ses_1', { hostId: 'h', pid: 2 }, 3000);
    expect(early).toMatchObject({ ok: false, owner: { pid: 1, epoch: 1 } });
    advance(2000);
    expect(await a.renewSession('ses_1', 1, 3000)).toBe(true);
    advance(2500);
    // Renewed at +2000 for 3000: still live at +4500.
    expect((await b.claimSession('ses_1', { hostId: 'h', pid: 2 }, 3000)).ok).toBe(false);
    advance(1000);
    const taken = await b.claimSession('ses_1', { hostId: 'h', pid: 2 }, 3000);
    expect(taken).toMatchObject({ ok: true, epoch: 2, previous: { pid: 1, epoch: 1 } });

    const stale = await a.commit({ sessionId: 'ses_1', label: 'step', fence });
    expect(stale).toEqual({ ok: false, conflict: { kind: 'fence', scope: 'session:ses_1', expected: 1, actual: 2, reason: 'taken' } });
    expect(await a.renewSession('ses_1', 1, 3000)).toBe(false);
    expect(await a.releaseSession('ses_1', 1)).toBe(false);
    expect((await b.commit({ sessionId: 'ses_1', label: 'step', fence: { scope: 'session:ses_1', epoch: 2 } })).ok).toBe(true);
    await close();
  });

  it('an operator take-over claims a live session at once; a released session is claimable at once; claimable lists only sessions with unfinished tasks and no live owner; the claims after each session\'s first are counted', async () => {
    const { a, b, close } = await twoHosts(kind);
    for (const s of ['ses_1', 'ses_2']) {
      await a.commit({ sessionId: s, label: 'submit', createSession: {}, tasks: [{ id: `task_${s}`, runId: null, parentId: null, kind: 'k', kindVersion: 1, phase: 'p', input: {} }] });
    }
    await a.commit({ sessionId: 'ses_3', label: 'submit', createSession: {} });
    expect(await b.claimableSessions(10)).toEqual(['ses_1', 'ses_2']);
    await a.claimSession('ses_1', { hostId: 'h', pid: 1 }, 60_000);
    expect(await b.claimableSessions(10)).toEqual(['ses_2']);
    expect(await b.claimSession('ses_1', { hostId: 'h', pid: 2 }, 60_000, { takeOver: true })).toMatchObject({ ok: true, epoch: 2 });
    expect(await b.releaseSession('ses_1', 2)).toBe(true);
    expect(await b.claimableSessions(10)).toEqual(['ses_1', 'ses_2']);
    expect(await a.claimSession('ses_1', { hostId: 'h', pid: 1 }, 60_000)).toMatchObject({ ok: true, epoch: 3 });
    // Claims after each session's first (what /metrics counts): ses_1's take-over and its claim after the release.
    await a.claimSession('ses_2', { hostId: 'h', pid: 1 }, 60_000);
    expect(await b.ownershipChanges()).toBe(2);
    await a.heartbeatHost({ id: 'h:1', hostId: 'h', pid: 1, tags: ['gpu'], concurrency: 2 });
    expect(await b.listHosts()).toMatchObject([{ id: 'h:1', tags: ['gpu'], stoppedAt: null }]);
    await close();
  });

  it('a worker\'s heartbeat report reads back as written and survives a heartbeat without one; a drain request is recorded once, by worker id or host id, and never for a stopped worker', async () => {
    const { a, b, close } = await twoHosts(kind);
    const report = { slotsInUse: 1, left: [{ sessionId: 'ses_9', runId: 'run_9', why: 'base image x is not on this engine' }] };
    await a.heartbeatHost({ id: 'h:1', hostId: 'h', pid: 1, tags: [], concurrency: 2, report });
    await a.heartbeatHost({ id: 'h:1', hostId: 'h', pid: 1, tags: [], concurrency: 2 });
    await a.heartbeatHost({ id: 'h:2', hostId: 'h', pid: 2, tags: [], concurrency: 1 });
    await a.heartbeatHost({ id: 'g:3', hostId: 'g', pid: 3, tags: [], concurrency: 1 });
    expect((await b.listHosts()).find((h) => h.id === 'h:1')).toMatchObject({ report, drainRequestedAt: null });
    expect(await b.getHost('h:1')).toMatchObject({ id: 'h:1', report, drainRequestedAt: null });
    expect(await b.getHost('h:99')).toBeUndefined();
    expect(await b.requestDrain('h:1')).toEqual(['h:1']);
    expect((await b.getHost('h:1'))?.drainRequestedAt).not.toBeNull();
    // Asked already: not again; the host id asks its other live worker.
    expect(await b.requestDrain('h:1')).toEqual([]);
    expect(await b.requestDrain('h')).toEqual(['h:2']);
    await a.stopHost('g:3');
    expect(await b.requestDrain('g')).toEqual([]);
    const hosts = await a.listHosts();
    expect(hosts.find((h) => h.id === 'h:1')!.drainRequestedAt).not.toBeNull();
    expect(hosts.find((h) => h.id === 'g:3')!.drainRequestedAt).toBeNull();
    await close();
  });

  it('of two hosts claiming an unowned session at once, exactly one gets it (epoch 1) and the other is told who holds it', async () => {
    const { a, b, close } = await twoHosts(kind);
    await a.commit({ sessionId: 'ses_1', label: 'submit', createSession: {} });
    const results = await Promise.all([a.claimSession('ses_1', { hostId: 'h', pid: 1 }, 60_000), b.claimSession('ses_1', { hostId: 'h', pid: 2 }, 60_000)]);
    expect(results.filter((r) => r.ok)).toHaveLength(1);
    const winner = results.find((r) => r.ok)!;
    const loser = results.find((r) => !r.ok)!;
    expect(winner).toMatchObject({ ok: true, epoch: 1, previous: null });
    expect(loser).toMatchObject({ ok: false, owner: { epoch: 1 } });
    expect(await a.getSessionOwner('ses_1')).toMatchObject({ epoch: 1, stoppedAt: null });
    expect(await a.listSessionOwners()).toHaveLength(1);
    await close();
  });
});

describe('run ownership on PostgreSQL without a test clock', () => {
  it('reads the server\'s clock: databaseNow lies between two readings of clock_timestamp() and a claim\'s lease runs from it', async () => {
    const { a, close } = await twoHosts('postgres', { serverClock: true });
    const server = async () => Number((await rawSql(a, 'SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint AS t'))[0]!.t);
    const before = await server();
    const now = await a.databaseNow();
    const after = await server();
    expect(now).toBeGreaterThanOrEqual(before);
    expect(now).toBeLessThanOrEqual(after);
    await a.commit({ sessionId: 'ses_1', label: 'submit', createSession: {} });
    const claim = await a.claimSession('ses_1', { hostId: 'h', pid: 1 }, 60_000);
    expect(claim.ok).toBe(true);
    expect((await a.getSessionOwner('ses_1'))!.leaseUntil).toBe(claim.now + 60_000);
    expect(claim.now).toBeGreaterThanOrEqual(after);
    await close();
  });
});
