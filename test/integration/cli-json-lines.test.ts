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
});
