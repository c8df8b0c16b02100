import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { describe, expect, test } from 'vitest';
import { openSqliteStore } from '../../host/store';
import { tempStore } from '../support/temp-store';

describe('writes synced with the next commit', { timeout: 120_000 }, () => {
  test('a lease record and a cost sample written without their own sync survive the writing process killed with SIGKILL', async () => {
    const t = tempStore();
    await t.store.close();
    try {
      const child = spawn('npx', ['tsx', 'test/support/deferred-sync-child.ts', t.path, 'lease_killed'], { stdio: ['ignore', 'pipe', 'inherit'], detached: true });
      await new Promise<void>((resolve, reject) => {
        createInterface({ input: child.stdout! }).once('line', (l) => (l === 'inserted' ? resolve() : reject(new Error(`child said ${l}`))));
        child.once('exit', (c) => reject(new Error(`child exited early with ${c}`)));
      });
      process.kill(-child.pid!, 'SIGKILL');
      await new Promise((r) => child.once('exit', r));
      const again = openSqliteStore(t.path);
      try {
        expect(await again.getLease('lease_killed')).toMatchObject({ sessionId: 'sess_child', releasedAt: null });
        expect(await again.sumCost({ runIds: ['run_lease_killed'] })).toEqual(
          expect.arrayContaining([expect.objectContaining({ meter: 'exec.count', amount: 1 }), expect.objectContaining({ meter: 'cpu.usec', amount: 42 })]),
        );
      } finally {
        await again.close();
      }
    } finally {
      await t.cleanup();
    }
  });

  test('a write synced with the next commit leaves the store at its own durability', async () => {
    for (const durability of ['full', 'normal'] as const) {
      const t = tempStore();
      await t.store.close();
      const store = openSqliteStore(t.path, { durability });
      try {
        const before = store.db.pragma('synchronous', { simple: true });
        await store.insertLease({ id: `lease_${durability}`, sessionId: 's', hostId: 'h', containerId: 'c', imageDigest: 'sha256:x', envFingerprint: 'f', createdAt: 1, expiresAt: 2, releasedAt: null, runId: null, epoch: null }, { sync: 'with-next-commit' });
        expect(store.db.pragma('synchronous', { simple: true })).toBe(before);
        await store.recordCost({ runId: 'run_d', at: 1, key: 'k', meters: { 'exec.count': 1 } }, { sync: 'with-next-commit' });
        expect(store.db.pragma('synchronous', { simple: true })).toBe(before);
        expect(await store.sumCost({ runIds: ['run_d'] })).toEqual([expect.objectContaining({ meter: 'exec.count', amount: 1 })]);
        expect(before).toBe(durability === 'full' ? 2 : 1);
        expect(await store.getLease(`lease_${durability}`)).toMatchObject({ sessionId: 's' });
      } finally {
        await store.close();
        await t.cleanup();
      }
    }
  });
});
