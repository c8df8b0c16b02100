import { afterEach, describe, expect, it } from 'vitest';
import { planFixture } from '../support/plan-fixture';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

/** Every line of `text` read as an NDJSON reader reads it: each one JSON object, nothing else. */
function ndjson(text: string, what: string): Array<Record<string, unknown>> {
  const lines = text.split('\n');
  expect(lines.at(-1), `${what}: ends with a newline`).toBe('');
  return lines.slice(0, -1).map((line, i) => {
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch {
      throw new Error(`${what}: line ${i + 1} is not JSON: ${JSON.stringify(line.slice(0, 200))}`);
    }
    expect(v !== null && typeof v === 'object' && !Array.isArray(v), `${what}: line ${i + 1} is an object`).toBe(true);
    return v as Record<string, unknown>;
  });
}

describe('--json output as NDJSON', { timeout: 300_000 }, () => {
  it('prints the driving commands\' events and their result as one JSON object per line, with the result\'s fields as before', async () => {
    fx = await planFixture([{ name: 'one', run: 'echo one > one.txt' }, { name: 'two', run: 'echo two > two.txt' }]);
    const run = await fx.cli(['run', fx.plan, '--json']);
    expect(run.code, run.stderr).toBe(0);
    // Before: "run --json: line 7 is not JSON: \"{\"" (the result was pretty-printed over 60 lines).
    const lines = ndjson(run.stdout, 'run --json');
    expect(lines.slice(0, -1).every((l) => 'event' in l)).toBe(true);
    const result = lines.at(-1) as { run: { id: string; state: string }; reason: string; steps: Array<{ step: string }>; acceptance: { state: string } };
    expect(result.run.state).toBe('completed');
    expect(result.steps.map((s) => s.step)).toEqual(['one', 'two']);
    expect(result).toHaveProperty('reason');
    expect(result.acceptance.state).toBe('pending');
    const runId = result.run.id;

    const fork = await fx.cli(['fork', runId, '--at', 'one', '--json']);
    expect(fork.code, fork.stderr).toBe(0);
    const forked = ndjson(fork.stdout, 'fork --json');
    expect(forked.at(-1)).toMatchObject({ run: { state: 'completed' } });

    for (const args of [['status'], ['show', runId], ['logs', runId], ['tree', runId], ['check', runId], ['resume', runId]]) {
      const r = await fx.cli([...args, '--json']);
      expect(r.code, `${args[0]}: ${r.stderr}`).toBe(0);
      expect(ndjson(r.stdout, `${args[0]} --json`).length, args[0]).toBeGreaterThanOrEqual(1);
    }
    const refused = await fx.cli(['show', 'run_nope', '--json']);
    expect(refused.code).toBe(1);
    expect(ndjson(refused.stderr, 'an error with --json')[0]).toMatchObject({ error: { code: 'run_not_found' } });
  });

  it('answers run --detach --json and fork --detach --json in one shape: the same fields for the run, its session, its state and where it was forked from', async () => {
    fx = await planFixture([{ name: 'one', run: 'echo one > one.txt' }, { name: 'two', run: 'echo two > two.txt' }]);
    const ran = await fx.cli(['run', fx.plan, '--json']);
    expect(ran.code, ran.stderr).toBe(0);
    const parent = (ndjson(ran.stdout, 'run').at(-1) as { run: { id: string } }).run.id;
    const submitted = await fx.cli(['run', fx.plan, '--detach', '--json']);
    const forked = await fx.cli(['fork', parent, '--at', 'one', '--detach', '--json']);
    expect(submitted.code, submitted.stderr).toBe(0);
    expect(forked.code, forked.stderr).toBe(0);
    const [a, b] = [ndjson(submitted.stdout, 'run --detach'), ndjson(forked.stdout, 'fork --detach')].map((lines) => {
      expect(lines).toHaveLength(1);
      return lines[0]!;
    }) as [Record<string, unknown>, Record<string, unknown>];
    // Before: run --detach gave {run, created, detached}, fork --detach {runId, forkedFrom, created}.
    expect(Object.keys(a).sort()).toEqual(Object.keys(b).sort());
    for (const [v, forkedFrom] of [[a, null], [b, expect.objectContaining({ runId: parent })]] as const) {
      const run = v.run as { id: string; sessionId: string; state: string };
      expect(v).toMatchObject({ detached: true, created: true, runId: run.id, sessionId: run.sessionId, state: 'admitted', forkedFrom });
    }
    // Both are left for somebody to drive: here, resumed, so the fixture's store ends with every run final.
    for (const v of [a, b]) expect((await fx.cli(['resume', v.runId as string])).code).toBe(0);
  });
});

