import { readFileSync, writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { planFixture } from '../support/plan-fixture';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

async function withAllow(network: string) {
  fx = await planFixture([{ name: 'one', run: 'echo one' }]);
  const envFile = `${fx.dir}/env.yaml`;
  writeFileSync(envFile, `${readFileSync(envFile, 'utf8')}network: ${network}\n`);
  return fx;
}

describe('risky egress allow lists', { timeout: 120_000 }, () => {
  it('refuses a private address at plan load, before any sandbox exists', async () => {
    const fx = await withAllow('{ mode: allowlist, allow: ["10.0.0.8:6379"] }');
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code).not.toBe(0);
    expect(end.stdout + end.stderr).toContain('network.allow: \\"10.0.0.8:6379\\" is refused');
    expect(await fx.docker.listContainers({ all: true, filters: { label: [`berth.host=${fx.hostId}`] } })).toEqual([]);
  });

  it('records the override on every run that uses it', async () => {
    const fx = await withAllow('{ mode: allowlist, allow: ["10.0.0.8:6379", "api.example.com:443"], allowOverride: ["10.0.0.8:6379"] }');
    for (let i = 0; i < 2; i++) {
      const end = await fx.cli(['run', fx.plan, '--json']);
      expect(end.code, end.stderr).toBe(0);
    }
    const recorded = await fx.read(async (s) => {
      const runs = await s.listRuns();
      return Promise.all(runs.map(async (r) => (await s.listEntries(r.sessionId)).filter((e) => e.kind === 'egress.override' && e.runId === r.id).map((e) => e.body)));
    });
    expect(recorded).toHaveLength(2);
    for (const bodies of recorded) expect(bodies).toEqual([{ mode: 'allowlist', allow: ['10.0.0.8:6379', 'api.example.com:443'], risks: [{ pattern: '10.0.0.8:6379', kind: 'private-address', why: '10.0.0.8 is in 10.0.0.0/8 (private)' }] }]);
  });
});
