import { createWarmPool, LABEL } from '../../host/sandbox';
import { describe, expect, test } from '../support/sandbox-fixture';

async function until<T>(what: string, probe: () => Promise<T | undefined | false>, ms = 120_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe().catch(() => undefined);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('sandbox warm pool liveness', { timeout: 180_000 }, () => {
  test('an idle pool container that dies is replaced by the pool, and a lease never gets it', async ({ sandbox }) => {
    const pool = createWarmPool(sandbox.host, sandbox.spec(), { size: 2 });
    const poolIds = async () => (await sandbox.docker.listContainers({ all: true, filters: { label: [`${LABEL.host}=${sandbox.hostId}`, `${LABEL.pool}=1`] } })).map((c) => c.Id);
    try {
      await pool.ready();
      const killed = await poolIds();
      expect(killed).toHaveLength(2);
      // As the lease watchdog ends an idle container after its TTL, or an operator's `docker kill`.
      await Promise.all(killed.map((id) => sandbox.docker.getContainer(id).kill()));
      // The pool learns it from the engine's events (no lease asked): the dead go, new ones start.
      await until('the dead pool containers replaced', async () => {
        const now = await poolIds();
        return now.length === 2 && killed.every((id) => !now.includes(id));
      });
      await pool.ready();
      expect(pool.available).toBe(2);
      const lease = await pool.lease({ sessionId: 'sess_warm', autoHeartbeat: false });
      expect(killed).not.toContain(lease.containerId);
      expect((await lease.exec('echo alive')).stdout).toBe('alive\n');
      await lease.release();
    } finally {
      await pool.close();
    }
  });

  test('a warm lease record is in the store as soon as the lease is handed out', async ({ sandbox }) => {
    const pool = createWarmPool(sandbox.host, sandbox.spec(), { size: 1 });
    try {
      await pool.ready();
      const lease = await pool.lease({ sessionId: 'sess_warm', autoHeartbeat: false });
      expect(await sandbox.store.getLease(lease.id)).toMatchObject({ sessionId: 'sess_warm', containerId: lease.containerId, releasedAt: null });
      // The store's own durability is back for every later commit.
      expect(sandbox.store.db.pragma('synchronous', { simple: true })).toBe(2);
      await lease.release();
    } finally {
      await pool.close();
    }
  });
});
