import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runNode } from '../support/child';
import { bundledCli, lastJson, planFixture } from '../support/plan-fixture';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

describe('berth status says who can move a run that no host drives', { timeout: 180_000 }, () => {
  it('a detached run no host has claimed waits for one (nothing "stopped"), and the same run imported elsewhere is a read-only record, never "berth resume"', async () => {
    fx = await planFixture([{ name: 'one', run: 'echo one' }]);
    const sub = await fx.cli(['run', fx.plan, '--detach', '--json']);
    expect(sub.code, sub.stderr).toBe(0);
    const runId = lastJson<{ run: { id: string } }>(sub).run.id;

    const here = await fx.cli(['status']);
    expect(here.code, here.stderr).toBe(0);
    const line = here.stdout.split('\n').find((l) => l.startsWith(runId))!;
    // Before: "admitted, no live host (stopped 1.2s ago): berth resume RUN", of a run no host ever ran.
    expect(line).toContain('admitted, not claimed by any host yet');
    expect(line).not.toContain('stopped');

    const file = join(fx.dir, 'record.json');
    expect((await fx.cli(['export', runId, '--out', file])).code).toBe(0);
    const other = join(fx.dir, 'other.db');
    const on = async (args: string[]) => runNode(await bundledCli(), [...args, '--store', other]);
    expect((await on(['import', file])).code).toBe(0);
    const there = await on(['status']);
    expect(there.code, there.stderr).toBe(0);
    const imported = there.stdout.split('\n').find((l) => l.startsWith(runId))!;
    // Before: "admitted, no live host (stopped …): berth resume RUN", and berth resume is refused as run_imported.
    expect(imported).toContain('admitted, imported record (read-only)');
    expect(imported).not.toContain('berth resume');
    const json = lastJson<{ runs: Array<{ id: string; owner: unknown; imported: boolean }> }>(await on(['status', '--json']));
    expect(json.runs.find((r) => r.id === runId)).toMatchObject({ owner: null, imported: true });
    // The store it was submitted to still has it to drive: the fixture's cleanup must find no leftovers.
    expect((await fx.cli(['cancel', runId])).code).toBe(0);
  });
});
