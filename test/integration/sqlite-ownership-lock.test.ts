import { spawn, type ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../host/store';
import { tempStore } from '../support/temp-store';

// Another process on the same SQLite file (a second `berth worker`) holds the write lock for a
// while: this process's claims, releases and beats must wait for it without freezing the process
// (its other sessions' phases and commits go on meanwhile), and still be durable when answered.
const HOLD_MS = 400;

let holder: ChildProcess | undefined;
let t: ReturnType<typeof tempStore> | undefined;
afterEach(async () => {
  if (holder && holder.exitCode === null) holder.kill('SIGKILL');
  await t?.cleanup();
  holder = undefined;
  t = undefined;
});

/** A real process that takes the file's write lock (BEGIN IMMEDIATE), says so, and commits after `ms`. */
async function holdWriteLock(path: string, ms: number): Promise<ChildProcess> {
  const code = `
    const Database = require('better-sqlite3');
    const db = new Database(process.argv[1]);
    db.exec('BEGIN IMMEDIATE');
    db.prepare("UPDATE hosts SET heartbeat_at = heartbeat_at WHERE id = 'none'").run();
    process.stdout.write('locked\\n');
    setTimeout(() => { db.exec('COMMIT'); db.close(); process.exit(0); }, Number(process.argv[2]));
  `;
  const child = spawn(process.execPath, ['-e', code, path, String(ms)], { cwd: process.cwd(), stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (c) => reject(new Error(`lock holder exited with ${c}`)));
  });
  return child;
}

/** How many 5 ms timer turns ran while `work` was under way, and how long it took. */
async function turnsDuring(work: () => Promise<unknown>): Promise<{ turns: number; ms: number }> {
  let turns = 0;
  const timer = setInterval(() => turns++, 5);
  const t0 = performance.now();
  try {
    await work();
  } finally {
    clearInterval(timer);
  }
  return { turns, ms: performance.now() - t0 };
}

describe('session ownership on a SQLite file another process is writing', () => {
  it('a claim, a release and a worker beat wait for the other process\'s write lock without freezing this process, and are on disk once answered', { timeout: 30_000 }, async () => {
    t = tempStore();
    const store = t.store;
    await store.commit({ sessionId: 's1', createSession: {}, label: 'test.session' });
    const holderPid = { hostId: 'h', pid: process.pid };

    holder = await holdWriteLock(t.path, HOLD_MS);
    const claim = await turnsDuring(async () => expect((await store.claimSession('s1', holderPid, 30_000)).ok).toBe(true));
    // It waited for the lock (the holder's whole hold, less its start-up), turning the event loop meanwhile.
    expect(claim.ms).toBeGreaterThan(HOLD_MS / 4);
    expect(claim.turns, `timer turns during a ${claim.ms.toFixed(0)} ms claim`).toBeGreaterThan(claim.ms / 5 / 4);

    holder = await holdWriteLock(t.path, HOLD_MS);
    const epoch = (await store.getSessionOwner('s1'))!.epoch;
    const release = await turnsDuring(async () => expect(await store.releaseSession('s1', epoch)).toBe(true));
    expect(release.turns, `timer turns during a ${release.ms.toFixed(0)} ms release`).toBeGreaterThan(release.ms / 5 / 4);

    holder = await holdWriteLock(t.path, HOLD_MS);
    const beat = await turnsDuring(() => store.heartbeatHost({ id: 'h:1', hostId: 'h', pid: 1, tags: [], concurrency: 1 }));
    expect(beat.turns, `timer turns during a ${beat.ms.toFixed(0)} ms beat`).toBeGreaterThan(beat.ms / 5 / 4);

    // Answered, so another process sees them (and they outlive this one): read from a fresh connection.
    const other = openSqliteStore(t.path);
    try {
      const owner = (await other.getSessionOwner('s1'))!;
      expect([owner.epoch, owner.stoppedAt !== null]).toEqual([epoch, true]);
      expect((await other.getHost('h:1'))?.hostId).toBe('h');
    } finally {
      await other.close();
    }
  });
});
