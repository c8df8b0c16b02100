import { afterEach, describe, expect, it } from 'vitest';
import { planFixture } from '../support/plan-fixture';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

describe('berth run says what a step is waiting for', { timeout: 120_000 }, () => {
  it('a step whose snapshot is slow is said to have ended, with its exit, before the snapshot is taken', async () => {
    fx = await planFixture([{ name: 'write', run: 'echo data > out.txt' }]);
    // 0: every snapshot counts as slow (by default one over 2 s: an 800 MB layer took ~10 s here,
    // the step's end line waiting for it while the command had long ended).
    const run = await fx.cli(['run', fx.plan], { BERTH_SLOW_SNAPSHOT_MS: '0' });
    expect(run.code, run.stderr.slice(-800)).toBe(0);
    const said = run.stderr.indexOf('sandbox: write ended (exit 0 in ');
    expect(said, run.stderr).toBeGreaterThan(-1);
    expect(run.stderr.slice(said)).toMatch(/^sandbox: write ended \(exit 0 in \d+\.\ds\); taking its snapshot\n/);
    expect(said).toBeLessThan(run.stderr.indexOf('write exit 0 in'));
  });
});
