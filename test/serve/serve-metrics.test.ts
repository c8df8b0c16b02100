import { afterEach, describe, expect, it } from 'vitest';
import { metricsText } from '../../host/serve/metrics';
import type { Store } from '../../host/store';
import { planFixture } from '../support/plan-fixture';
import { startServeChild } from '../support/serve-browser';
import { tempStore } from '../support/temp-store';

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
  it('a scrape reads counts, not rows: with 300 runs in the store it reads as few rows as with none, and still counts every run by state', async () => {
    const t = tempStore();
    try {
      // Rows each store read returned, counted on the real store (a scrape of a store of months read them all).
      let rows = 0;
      const counted = new Proxy(t.store, {
        get(target, key, recv) {
          const v = Reflect.get(target, key, recv) as unknown;
          if (typeof v !== 'function') return v;
          return async (...args: unknown[]) => {
            const out = await (v as (...a: unknown[]) => Promise<unknown>).apply(target, args);
            if (Array.isArray(out)) rows += out.length;
            else if (out && typeof out === 'object' && Array.isArray((out as { runs?: unknown }).runs)) rows += (out as { runs: unknown[] }).runs.length;
            return out;
          };
        },
      }) as Store;
      const rowsOfScrape = async () => {
        rows = 0;
        const text = await metricsText(counted, 'here');
        return { rows, text };
      };
      const empty = await rowsOfScrape();
      for (let i = 0; i < 300; i++) {
        const id = `run_m${i}`;
        await t.store.commit({
          sessionId: `ses_m${i}`,
          label: 'submit',
          createSession: { meta: { plan: 'plan.yaml' } },
          runs: [{ id, kind: 'plan', submissionId: null, rootTaskId: null, versions: {} }],
          runTransitions: [{ runId: id, from: 'admitted', to: 'running', actor: 'test', reason: 'start' }, ...(i % 3 === 0 ? [] : [{ runId: id, from: 'running' as const, to: 'completed' as const, actor: 'test', reason: 'end' }])],
          fence: null,
        } as unknown as Parameters<Store['commit']>[0]);
      }
      const full = await rowsOfScrape();
      expect(full.text).toContain('berth_runs{state="completed"} 200');
      expect(full.text).toContain('berth_runs{state="running"} 100');
      expect(full.rows).toBe(empty.rows);
    } finally {
      await t.cleanup();
    }
  });
});
