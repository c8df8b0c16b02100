import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Run } from '../../host/model';
import { lastJson, planFixture } from '../support/plan-fixture';

type Summary = { run: Run; reason: string; steps: Array<{ step: string; outcome: string; code?: string }> };
type Listed = { runId: string; artifacts: Array<{ path: string; size: number; sha256: string; status: string }> };

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

// The listing of a step's files is read back from a command's output: a name is bytes, which a
// line of text carries only when they hold no newline and are UTF-8.
describe('artifact names that a line of text cannot carry', { timeout: 300_000 }, () => {
  it('keeps an artifact whose name holds a newline under its exact name, next to a decoy line it spells, and fetches it', async () => {
    // A directory's newline is followed by what a listing line looks like: out/ghost must not be taken for a file.
    fx = await planFixture([
      { name: 'build', run: `mkdir -p out && echo ok > out/ok.txt && printf two > "out/$(printf 'two\\nlines.txt')" && d="out/$(printf 'x\\n81a4:1:')/workspace/out" && mkdir -p "$d" && printf x > "$d/ghost"`, artifacts: ['out/**'] },
    ]);
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr).toBe(0);
    const runId = lastJson<Summary>(end).run.id;
    const listed = await fx.cli(['artifacts', runId, '--json']);
    expect(listed.code, listed.stderr).toBe(0);
    const arts = lastJson<Listed>(listed).artifacts;
    expect(arts.map((a) => a.path).sort()).toEqual(['out/ok.txt', 'out/two\nlines.txt', 'out/x\n81a4:1:/workspace/out/ghost']);
    expect(arts.find((a) => a.path === 'out/two\nlines.txt')).toMatchObject({ size: 3, sha256: sha256('two'), status: 'present' });

    const out = join(fx.dir, 'fetched');
    const fetched = await fx.cli(['artifacts', runId, '--out', out, '--json']);
    expect(fetched.code, fetched.stderr).toBe(0);
    expect(readFileSync(join(out, 'out', 'two\nlines.txt'), 'utf8')).toBe('two');
  });

  it('refuses the step\'s artifacts at once when a matched name is not UTF-8, naming its bytes, never as an engine error retried', async () => {
    fx = await planFixture([{ name: 'build', run: `mkdir -p out && echo ok > out/ok.txt && printf b > "out/$(printf 'u\\377.bin')"`, artifacts: ['out/*'] }]);
    const started = Date.now();
    const end = await fx.cli(['run', fx.plan, '--json']);
    const took = Date.now() - started;
    expect(end.code, end.stderr).toBe(1);
    const summary = lastJson<Summary>(end);
    expect(summary.run.state).toBe('failed');
    expect(summary.reason).toContain('out/u\\xff.bin');
    expect(summary.reason).toMatch(/not UTF-8/);
    expect(summary.reason).not.toMatch(/no such container/);
    expect(summary.steps[0]!.code).toBe('artifact_refused');
    // An engine error is retried for half a minute before the step fails; a refusal is not.
    expect(took).toBeLessThan(20_000);
  });
});
