import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { lastJson, planFixture } from '../support/plan-fixture';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

describe('berth export --out naming the store itself', { timeout: 180_000 }, () => {
  it('is refused, naming the store, and the store keeps every run (it was replaced by the one record)', async () => {
    fx = await planFixture([{ name: 'one', run: 'echo one' }]);
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr).toBe(0);
    const runId = lastJson<{ run: { id: string } }>(end).run.id;
    const before = readFileSync(fx.store);

    // The same file by another spelling, and its WAL beside it.
    for (const out of [fx.store, relative(process.cwd(), fx.store), join(fx.dir, '.', 'berth.db'), `${fx.store}-wal`]) {
      const r = await fx.cli(['export', runId, '--out', out, '--json']);
      // Before: exit 0, "exported run … to …/berth.db", and the next command said store_not_berth.
      expect(r.code, `${out}: ${r.stdout}`).toBe(1);
      const err = (JSON.parse(r.stderr) as { error: { code: string; message: string } }).error;
      expect(err.code).toBe('output_unwritable');
      expect(err.message).toContain('is the store');
    }
    expect(readFileSync(fx.store).subarray(0, 16).toString('latin1')).toBe('SQLite format 3\u0000');
    expect(readFileSync(fx.store).length).toBeGreaterThanOrEqual(before.length);
    const shown = await fx.cli(['show', runId]);
    expect(shown.code, shown.stderr).toBe(0);
  });
});
