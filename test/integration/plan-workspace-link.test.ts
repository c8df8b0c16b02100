import { mkdirSync, renameSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { lastJson, planFixture } from '../support/plan-fixture';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

describe('a plan whose workspace is a symlink to a directory', { timeout: 180_000 }, () => {
  it('uploads the directory it points to (workspace: current -> releases/7), as the plan\'s check already accepted, instead of refusing it as "does not exist"', async () => {
    fx = await planFixture([{ name: 'read', run: 'cat README' }], { README: 'from release 7\n' });
    mkdirSync(join(fx.dir, 'releases'));
    renameSync(join(fx.dir, 'ws'), join(fx.dir, 'releases', '7'));
    symlinkSync('releases/7', join(fx.dir, 'ws'));

    const end = await fx.cli(['run', fx.plan, '--json']);
    // Before: exit 1, not_found "host directory …/ws does not exist or is not a directory".
    expect(end.code, end.stderr.slice(-800)).toBe(0);
    const out = lastJson<{ run: { state: string }; steps: Array<{ stdoutTail: string }> }>(end);
    expect(out.run.state).toBe('completed');
    expect(out.steps[0]!.stdoutTail).toContain('from release 7');
  });
});
