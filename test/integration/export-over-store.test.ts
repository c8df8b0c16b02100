import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
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

describe('berth export killed before its record is in place', { timeout: 180_000 }, () => {
  it('leaves FILE as it was, and the next export removes the half record the killed one left, to FILE or to stdout', async () => {
    fx = await planFixture([{ name: 'one', run: 'echo one' }]);
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr).toBe(0);
    const runId = lastJson<{ run: { id: string } }>(end).run.id;
    const out = join(fx.dir, 'out');
    mkdirSync(out);
    const file = join(out, 'record.json');
    // The stdout export's temporary directory, kept inside the test's own directory.
    const tmp = join(fx.dir, 'tmp');
    mkdirSync(tmp);
    const env = { TMPDIR: tmp };
    const first = await fx.cli(['export', runId, '--out', file], env);
    expect(first.code, first.stderr).toBe(0);
    const good = readFileSync(file, 'utf8');

    // Killed with the whole record written beside FILE and not yet renamed over it.
    const killed = await fx.cli(['export', runId, '--out', file], { ...env, BERTH_FAULT: 'export:written' });
    expect(killed.signal, killed.stderr).toBe('SIGKILL');
    expect(readFileSync(file, 'utf8')).toBe(good);
    const left = readdirSync(out).filter((n) => n !== 'record.json');
    expect(left).toHaveLength(1);
    expect(left[0]).toMatch(/^record\.json\.partial-\d+$/);
    const killedOut = await fx.cli(['export', runId], { ...env, BERTH_FAULT: 'export:written' });
    expect(killedOut.signal, killedOut.stderr).toBe('SIGKILL');
    expect(readdirSync(tmp)).toHaveLength(1);

    // Before: each killed export's half record stayed (record.json.partial-PID, one more per kill).
    const again = await fx.cli(['export', runId, '--out', file], env);
    expect(again.code, again.stderr).toBe(0);
    expect(readdirSync(out)).toEqual(['record.json']);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toHaveProperty('digest');
    const toStdout = await fx.cli(['export', runId], env);
    expect(toStdout.code, toStdout.stderr).toBe(0);
    expect(JSON.parse(toStdout.stdout)).toHaveProperty('digest');
    expect(readdirSync(tmp)).toEqual([]);
  });
});
