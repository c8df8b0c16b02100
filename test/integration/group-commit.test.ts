import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { isBerthError } from '../../host/errors';
import { openPostgresStore, openSqliteStore, type CommitInput, type CommitResult, type Store } from '../../host/store';
import { newStoreLocation, rawSql, STORE_KINDS, stopSharedPostgres, type StoreKind } from '../support/store-kinds';

afterAll(stopSharedPostgres, 60_000);

let cleanup: (() => Promise<void>) | undefined;
afterEach(async () => {
  await cleanup?.();
  cleanup = undefined;
});

const SESSIONS = ['ses_a', 'ses_b', 'ses_c', 'ses_d'];
const HOLDER = { hostId: 'h', pid: null };

/**
 * Host A (store handle `a`) owns four sessions, each with one task at version 1; host B (`b`, a
 * second handle on the same store, as another host) then takes `ses_b` over. The clock counts
 * every reading, so two commits share a time only when one clock reading served both.
 */
async function fourSessions(kind: StoreKind) {
  const loc = await newStoreLocation(kind);
  let now = 1_000_000;
  const clock = { now: () => (now += 1) };
  const open = async (): Promise<Store> => (kind === 'sqlite' ? openSqliteStore(loc.location, { clock }) : openPostgresStore(loc.location, { clock }));
  const a = await open();
  const b = await open();
  cleanup = async () => (await a.close(), await b.close(), loc.cleanup());
  const epochs = new Map<string, number>();
  for (const sid of SESSIONS) {
    await a.commit({ sessionId: sid, label: 'submit', createSession: {}, tasks: [{ id: `task_${sid}`, runId: null, parentId: null, kind: 'k', kindVersion: 1, phase: 'p0', input: {} }] });
    const claim = await a.claimSession(sid, HOLDER, 600_000);
    if (!claim.ok) throw new Error(`claim of ${sid} refused`);
    epochs.set(sid, claim.epoch);
  }
  const taken = await b.claimSession('ses_b', { hostId: 'other', pid: null }, 600_000, { takeOver: true });
  expect(taken.ok).toBe(true);
  return { a, epochs };
}

/** One phase step of a session's task, fenced by host A's epoch. */
const step = (sid: string, epoch: number): CommitInput => ({
  sessionId: sid,
  label: 'phase.next:k',
  fence: { scope: `session:${sid}`, epoch },
  entries: [{ id: `ent_${sid}`, kind: 'note', body: sid }],
  taskTransitions: [{ taskId: `task_${sid}`, expectVersion: 1, set: { phase: 'p1' } }],
});

async function phases(store: Store): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const sid of SESSIONS) out[sid] = (await store.getTask(`task_${sid}`))!.phase;
  return out;
}

describe.each(STORE_KINDS)('concurrent commits of one host (%s store)', (kind) => {
  it('commits asked for at once with one fenced-out member: the others are committed, that one is refused and writes nothing', async () => {
    const { a, epochs } = await fourSessions(kind);
    // Asked for in one turn: on SQLite one group (one transaction), on PostgreSQL concurrent transactions.
    const results = await Promise.all(SESSIONS.map((sid) => a.commit(step(sid, epochs.get(sid)!))));
    const bySession = Object.fromEntries(SESSIONS.map((sid, i) => [sid, results[i]!]));
    expect(bySession.ses_b).toMatchObject({ ok: false, conflict: { kind: 'fence', scope: 'session:ses_b', reason: 'taken' } });
    for (const sid of ['ses_a', 'ses_c', 'ses_d']) expect(bySession[sid]).toMatchObject({ ok: true, seq: 2 });
    expect(await phases(a)).toEqual({ ses_a: 'p1', ses_b: 'p0', ses_c: 'p1', ses_d: 'p1' });
    expect((await a.listEntries('ses_b')).map((e) => e.id)).toEqual([]);
    expect((await a.listCommits('ses_b')).map((c) => c.label)).toEqual(['submit']);
    for (const sid of ['ses_a', 'ses_c', 'ses_d']) expect((await a.listCommits(sid)).map((c) => c.label)).toEqual(['submit', 'phase.next:k']);
    // The store-wide commit order holds the three, once each.
    const logged = await rawSql(a, "SELECT session_id FROM commit_log WHERE session_seq = 2 ORDER BY session_id");
    expect(logged.map((r) => r.session_id)).toEqual(['ses_a', 'ses_c', 'ses_d']);
    if (kind === 'sqlite') {
      // One clock reading served every member: they were written in one transaction.
      const ats = new Set(results.filter((r): r is Extract<CommitResult, { ok: true }> => r.ok).map((r) => r.at));
      expect(ats.size).toBe(1);
    }
  });

  it('a member refused by its compare-and-set and a member that throws leave the others of its group committed', async () => {
    const { a, epochs } = await fourSessions(kind);
    const stale: CommitInput = { ...step('ses_c', epochs.get('ses_c')!), taskTransitions: [{ taskId: 'task_ses_c', expectVersion: 7, set: { phase: 'p1' } }] };
    const settled = await Promise.allSettled([
      a.commit(step('ses_a', epochs.get('ses_a')!)),
      a.commit(stale),
      a.commit({ sessionId: 'ses_missing', label: 'phase.next:k', entries: [{ id: 'ent_missing', kind: 'note', body: 1 }] }),
      a.commit(step('ses_d', epochs.get('ses_d')!)),
    ]);
    expect(settled[0]).toMatchObject({ status: 'fulfilled', value: { ok: true } });
    expect(settled[1]).toMatchObject({ status: 'fulfilled', value: { ok: false, conflict: { kind: 'task_version', taskId: 'task_ses_c', expected: 7, actual: 1 } } });
    expect(settled[2].status).toBe('rejected');
    expect(isBerthError((settled[2] as PromiseRejectedResult).reason, 'session_not_found')).toBe(true);
    expect(settled[3]).toMatchObject({ status: 'fulfilled', value: { ok: true } });
    expect(await phases(a)).toEqual({ ses_a: 'p1', ses_b: 'p0', ses_c: 'p0', ses_d: 'p1' });
    expect((await a.listEntries('ses_c')).map((e) => e.id)).toEqual([]);
    expect((await a.listEntries('ses_a')).map((e) => e.id)).toEqual(['ent_ses_a']);
  });

  it('two commits of one session asked for at once are applied in the order asked, with consecutive sequence numbers', async () => {
    const { a, epochs } = await fourSessions(kind);
    const first = step('ses_a', epochs.get('ses_a')!);
    const second: CommitInput = { ...first, entries: [{ id: 'ent_second', kind: 'note', body: 2 }], taskTransitions: [{ taskId: 'task_ses_a', expectVersion: 2, set: { phase: 'p2' } }] };
    const [r1, r2] = await Promise.all([a.commit(first), a.commit(second)]);
    // The second expects the version the first leaves: it passes only when applied after it.
    expect(r1).toMatchObject({ ok: true });
    if (kind === 'sqlite' || r2.ok) {
      // SQLite: one group, applied in the order asked, so the second sees the first's write.
      expect([r1, r2]).toMatchObject([{ ok: true, seq: 2 }, { ok: true, seq: 3 }]);
      expect((await a.getTask('task_ses_a'))!.phase).toBe('p2');
    } else {
      // PostgreSQL runs them as concurrent transactions: the second may land first and be refused.
      expect(r2).toMatchObject({ ok: false, conflict: { kind: 'task_version', taskId: 'task_ses_a', expected: 2 } });
      expect((await a.getTask('task_ses_a'))!.phase).toBe('p1');
    }
  });
});
