import { afterEach, describe, expect, it } from 'vitest';
import { planFixture } from '../support/plan-fixture';
import { startServeChild } from '../support/serve-browser';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

describe('berth serve /metrics', { timeout: 180_000 }, () => {
  it('serves the fleet state in the Prometheus text format behind the token: runs by state, workers, snapshots, leases', async () => {
    fx = await planFixture([{ name: 'one', run: 'echo one > one.txt' }]);
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr).toBe(0);
    const server = await startServeChild(fx.store, fx.hostId);
    try {
      const token = server.login ? new URL(server.login).searchParams.get('token') : null;
      if (token) expect((await fetch(`${server.url}/metrics`)).status).toBe(401);
      const res = await fetch(`${server.url}/metrics`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toContain('text/plain');
      const text = await res.text();
      expect(text).toContain('# TYPE berth_runs gauge');
      expect(text).toContain('berth_runs{state="completed"} 1');
      expect(text).toContain('berth_runs{state="running"} 0');
      expect(text).toContain('berth_leases_active 0');
      expect(text).toMatch(/^berth_snapshots\{pushed="false"\} [1-9]\d*$/m);
      expect(text).toContain('berth_workers{state="live"} 0');
    } finally {
      await server.stop();
    }
  });
});
