import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { describe, expect, test } from 'vitest';
import { openSqliteStore } from '../../host/store';
import { tempStore } from '../support/temp-store';

describe('lease records synced with the next commit', { timeout: 120_000 }, () => {
  test('a lease record written without its own sync survives the writing process killed with SIGKILL', async () => {
    const t = tempStore();
    await t.store.close();
    try {
      const child = spawn('npx', ['tsx', 'test/support/lease-insert-child.ts', t.path, 'lease_killed'], { stdio: ['ignore', 'pipe', 'inherit'], detached: true });
      await new Promise<void>((resolve, reject) => {
        createInterface({ input: child.stdout! }).once('line', (l) => (l === 'inserted' ? resolve() : reject(new Error(`child said ${l}`))));
        child.once('exit', (c) => reject(new Error(`child exited early with ${c}`)));
      });
      process.kill(-child.pid!, 'SIGKILL');
      await new Promise((r) => child.once('exit', r));
      const again = openSqliteStore(t.path);
      try {
        expect(await again.getLease('lease_killed')).toMatchObject({ sessionId: 'sess_child', releasedAt: null });
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
        expect(before).toBe(durability === 'full' ? 2 : 1);
        expect(await store.getLease(`lease_${durability}`)).toMatchObject({ sessionId: 's' });
      } finally {
        await store.close();
        await t.cleanup();
      }
    }
  });
});
