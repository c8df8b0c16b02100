import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { cliWorld, type CliWorld } from '../support/agent-cli-world';
import { bundleScript } from '../support/bundle-script';
import { runNode } from '../support/child';
import { bundledCli, lastJson, planFixture } from '../support/plan-fixture';

/**
 * `berth export` through its own entry (host/cli/export-entry.ts, which host/cli/bin.mjs starts for
 * an export without extensions) writes the record the full CLI writes: same sections, same
 * contract fields (the built-in kinds' retry policies come from a table instead of the handlers),
 * and the same errors and exit codes.
 */
let entry: string | undefined;
const lean = async () => (entry ??= await bundleScript(join(process.cwd(), 'host', 'cli', 'export-entry.ts')));
afterAll(() => {
  if (entry) rmSync(entry, { force: true });
});

/** The record without what differs between two exports of the same rows: the time of export, the snapshots' storage until then, the digest over both. */
const timeless = (text: string) => {
  const { exportedAt: _at, digest: _digest, ...rest } = JSON.parse(text) as Record<string, unknown> & { cost?: { summary?: { snapshotGbMonths?: number } } };
  if (rest.cost?.summary) delete rest.cost.summary.snapshotGbMonths;
  return rest;
};
const comparable = (file: string) => timeless(readFileSync(file, 'utf8'));

async function bothExports(store: string, runId: string, dir: string) {
  const full = await runNode(await bundledCli(), ['export', runId, '--store', store, '--out', join(dir, 'full.json'), '--json']);
  expect(full.code, full.stderr).toBe(0);
  const own = await runNode(await lean(), ['export', runId, '--store', store, '--out', join(dir, 'lean.json'), '--json']);
  expect(own.code, own.stderr).toBe(0);
  expect(Object.keys(lastJson<Record<string, unknown>>(own)).sort()).toEqual(Object.keys(lastJson<Record<string, unknown>>(full)).sort());
  expect(comparable(join(dir, 'lean.json'))).toEqual(comparable(join(dir, 'full.json')));
  // To stdout, the record itself.
  const piped = await runNode(await lean(), ['export', runId, '--store', store]);
  expect(piped.code, piped.stderr).toBe(0);
  expect(timeless(piped.stdout)).toEqual(comparable(join(dir, 'lean.json')));
  return comparable(join(dir, 'lean.json'));
}

describe("berth export's own entry", { timeout: 300_000 }, () => {
  let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
  let w: CliWorld | undefined;
  afterEach(async () => {
    await fx?.cleanup();
    await w?.cleanup();
    fx = undefined;
    w = undefined;
  });

  it('exports a plan run as the full CLI does, the plan kinds\' retry policies included', async () => {
    fx = await planFixture([{ name: 'a', run: 'echo a > a.txt' }, { name: 'b', run: 'cat a.txt' }]);
    const ran = await fx.cli(['run', fx.plan, '--json']);
    expect(ran.code, ran.stderr).toBe(0);
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const record = await bothExports(fx.store, runId, fx.dir);
    expect(JSON.stringify(record)).toContain('"maxRetries":8');
  });

  it('exports an agent run as the full CLI does, the agent kinds\' retry policies included', async () => {
    w = await cliWorld([{ toolCalls: [{ name: 'exec', arguments: { command: 'echo hi' } }] }, { content: 'done' }]);
    const ran = await w.cli([...w.agentArgs('say hi'), '--json']);
    expect(ran.code, ran.stderr).toBe(0);
    const runId = await w.read(async (s) => (await s.listRuns())[0]!.id);
    const record = await bothExports(w.store, runId, w.dir);
    expect(JSON.stringify(record)).toContain('agent-generate');
    expect(JSON.stringify(record)).not.toContain('is not registered in the exporting process');
  });

  it('fails as the full CLI does: an unknown run, a missing store, no RUN', async () => {
    fx = await planFixture([{ name: 'a', run: 'true' }]);
    expect((await fx.cli(['run', fx.plan])).code).toBe(0);
    for (const args of [['export', 'run_nope', '--store', fx.store], ['export', 'run_nope', '--store', join(fx.dir, 'missing.db')], ['export', 'run_nope', '--store', fx.store, '--json']]) {
      const full = await runNode(await bundledCli(), args);
      const own = await runNode(await lean(), args);
      expect(own.code, args.join(' ')).toBe(full.code);
      expect(own.code).toBe(1);
      expect(own.stderr).toBe(full.stderr);
    }
    const usage = await runNode(await lean(), ['export', '--store', fx.store]);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('berth export needs RUN');
  });
});
