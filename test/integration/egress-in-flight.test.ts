import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type ServerResponse, type Server } from 'node:http';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { bundledCli, lastJson, planFixture } from '../support/plan-fixture';
import { sharedPostgres, STORE_KINDS, stopSharedPostgres, type StoreKind } from '../support/store-kinds';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
let target: Server | undefined;
const held = new Set<ServerResponse>();
afterEach(async () => {
  for (const r of held) r.destroy();
  held.clear();
  await new Promise((r) => (target ? target.close(r) : r(undefined)));
  await fx?.cleanup();
  fx = undefined;
  target = undefined;
}, 400_000);
afterAll(stopSharedPostgres);

interface Attempt { method: string; target: string; decision: string; id?: string | null; endedAt?: number | null }

const poll = async <T>(what: string, f: () => Promise<T | undefined>, tries = 1200): Promise<T> => {
  for (let i = 0; i < tries; i++) {
    const v = await f().catch(() => undefined);
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
};

describe.each(STORE_KINDS)('an egress request in flight when its host is killed (%s store)', { timeout: 400_000 }, (kind: StoreKind) => {
  it('is recorded when it starts, so berth show --json and the export still list it (with no end) after a SIGKILL of berth run', async () => {
    // The outside target answers nothing: the request hangs until the test ends.
    let seen = 0;
    target = createServer((_req, res) => {
      seen += 1;
      held.add(res);
    });
    await new Promise<void>((r) => target!.listen(0, '127.0.0.1', () => r()));
    const port = (target.address() as { port: number }).port;
    fx = await planFixture([{ name: 'fetch', run: `timeout 300 busybox wget -q -O - http://localhost:${port}/slow` }], undefined, kind === 'postgres' ? { store: await (await sharedPostgres()).createStoreDatabase('egress') } : {});
    const envFile = `${fx.dir}/env.yaml`;
    writeFileSync(envFile, `${readFileSync(envFile, 'utf8')}network: { mode: allowlist, allow: ["localhost:${port}"], allowOverride: ["localhost:${port}"] }\n`);

    const child = spawn(process.execPath, [await bundledCli(), 'run', fx.plan, '--store', fx.store], { env: { ...process.env, BERTH_HOST_ID: fx.hostId, BERTH_OPERATOR: 'tester' }, stdio: 'ignore' });
    const exited = new Promise<NodeJS.Signals | null>((r) => child.on('exit', (_c, sig) => r(sig)));
    await poll('the request to reach the target', async () => (seen > 0 ? true : undefined));
    const runId = await poll('the run', () => fx!.read(async (s) => (await s.listRuns())[0]?.id));
    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');

    const show = await fx.cli(['show', runId, '--json']);
    expect(show.code, show.stderr).toBe(0);
    const attempts = lastJson<{ egress: { allowed: number; attempts: Attempt[] } }>(show).egress.attempts;
    // Before: an allowed request was recorded only when its response ended, so this one was missing.
    const inFlight = attempts.filter((a) => a.decision === 'allow' && a.target === `localhost:${port}`);
    expect(inFlight).toHaveLength(1);
    expect(inFlight[0]).toMatchObject({ method: 'GET', id: expect.stringMatching(/^egr_/), endedAt: null });

    const exported = await fx.cli(['export', runId]);
    expect(exported.code, exported.stderr).toBe(0);
    const record = JSON.parse(exported.stdout) as { egress: Attempt[]; entries: Array<{ kind: string; body: { id?: string } }> };
    expect(record.egress.filter((a) => a.id === inFlight[0]!.id)).toEqual([expect.objectContaining({ decision: 'allow', endedAt: null })]);
    expect(record.entries.filter((e) => e.kind === 'egress.started').map((e) => e.body.id)).toEqual([inFlight[0]!.id]);

    // Ended by the operator (a cancel with no live host stops the sandbox; the fetch may have reached
    // the target, so the run asks whether it happened), so nothing is left running.
    const cancel = await fx.cli(['cancel', runId]);
    // 3: the cancel carried out here left the run needing a decision (the fetch may have reached the target).
    expect([0, 3], cancel.stderr).toContain(cancel.code);
    const parked = await poll('the cancel to settle', () => fx!.read(async (s) => {
      const state = (await s.getRun(runId))?.state;
      return state === 'cancelled' || state === 'needs_reconciliation' ? state : undefined;
    }));
    if (parked === 'needs_reconciliation') {
      const failed = await fx.cli(['reconcile', runId, '--accept', '--fail']);
      expect(failed.code, failed.stderr).toBe(0);
    }
  });
});
