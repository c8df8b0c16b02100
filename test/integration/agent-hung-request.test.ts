import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { cliWorld, startInBackground } from '../support/agent-cli-world';

let w: Awaited<ReturnType<typeof cliWorld>> | undefined;
afterEach(async () => {
  await w?.cleanup();
  w = undefined;
});

describe('a model request the host died waiting for', { timeout: 300_000 }, () => {
  it('is an interruption entry of the resumed run (host_stopped, attempt 1), the retry is the second request, and the run\'s cost counts every request the server received', async () => {
    // The first request of the turn never gets an answer (a frozen server); the next one does.
    w = await cliWorld([{ faults: ['hang'], content: 'done' }]);
    const host = await startInBackground(w, w.agentArgs('say done'));
    while (w.model.requests.length === 0) await sleep(100);
    host.child.kill('SIGKILL');
    await host.exited;
    const runId = await w.read(async (s) => (await s.listRuns())[0]!.id);

    const resumed = await w.cli(['resume', runId]);
    expect(resumed.code, resumed.stderr.slice(-800)).toBe(0);
    expect(w.model.requests).toHaveLength(2);
    const out = await w.cli(['export', runId]);
    expect(out.code, out.stderr).toBe(0);
    const r = JSON.parse(out.stdout) as { entries: Array<{ kind: string; body: Record<string, unknown> }>; cost: { samples: Array<{ meter: string; amount: number }> } };
    // Before (a race in the restart): the request was sent again as if nothing had happened, with no interruption and attempt 1.
    const interrupted = r.entries.filter((e) => e.kind === 'agent.interruption');
    expect(interrupted.map((e) => [e.body.code, e.body.attempt])).toEqual([['host_stopped', 1]]);
    const requests = r.cost.samples.filter((s) => s.meter === 'model.requests').reduce((n, s) => n + s.amount, 0);
    expect(requests).toBe(w.model.requests.length);
    const check = await w.cli(['check', runId]);
    expect(check.code, check.stdout + check.stderr).toBe(0);
  });
});
