import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../host/store';

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

/** Two store handles on one SQLite file (two host processes), on one settable clock (the database clock). */
function twoHosts() {
  dir = mkdtempSync(join(tmpdir(), 'berth-own-'));
  let now = 1_000_000;
  const clock = { now: () => now };
  const path = join(dir, 'berth.db');
  const a = openSqliteStore(path, { clock });
  const b = openSqliteStore(path, { clock });
  return { a, b, advance: (ms: number) => (now += ms), close: async () => (await a.close(), await b.close()) };
}

describe('run ownership in the store', () => {
  it('a claim is refused while the owner\'s lease is live, taken after it ran out with a new epoch, and the old owner\'s commits and renewals are then refused', async () => {
    const { a, b, advance, close } = twoHosts();
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
    expect(stale).toEqual({ ok: false, conflict: { kind: 'fence', scope: 'session:ses_1', expected: 1, actual: 2 } });
    expect(await a.renewSession('ses_1', 1, 3000)).toBe(false);
    expect(await a.releaseSession('ses_1', 1)).toBe(false);
    expect((await b.commit({ sessionId: 'ses_1', label: 'step', fence: { scope: 'session:ses_1', epoch: 2 } })).ok).toBe(true);
    await close();
  });

  it('an operator take-over claims a live session at once; a released session is claimable at once; claimable lists only sessions with unfinished tasks and no live owner', async () => {
    const { a, b, close } = twoHosts();
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
    await a.heartbeatHost({ id: 'h:1', hostId: 'h', pid: 1, tags: ['gpu'], concurrency: 2 });
    expect(await b.listHosts()).toMatchObject([{ id: 'h:1', tags: ['gpu'], stoppedAt: null }]);
    await close();
  });
});
