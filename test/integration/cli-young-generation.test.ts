import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runNode } from '../support/child';

const BIN = join(process.cwd(), 'host', 'cli', 'bin.mjs');
const dir = mkdtempSync(join(tmpdir(), 'berth-young-gen-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/**
 * Loaded with `--require` before the bin: when the command ends, a burst of allocation whose
 * objects survive a few scavenges (what loading a long plan does), then the young generation's size.
 * Left to its defaults V8 grows the young generation to 32 MB under it.
 */
const PROBE = `
const v8 = require('node:v8');
process.on('exit', () => {
  let kept = [];
  for (let i = 0; i < 3e6; i++) {
    const o = { i, s: 'x' + i };
    if (i % 3 === 0) kept.push(o);
    if (kept.length > 2e5) kept = [];
  }
  const young = v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size;
  require('node:fs').writeFileSync(process.env.BERTH_TEST_YOUNG_OUT, String(young));
});
`;

describe('the berth command keeps its young generation at its starting size', () => {
  it.each([
    ['status', ['status', '--store', join(dir, 'none.db')]],
    ['export', ['export', 'run_none', '--store', join(dir, 'none.db')]],
  ])('in `berth %s`, a burst of surviving allocation does not grow it past 2 MB', async (name, args) => {
    const probe = join(dir, 'probe.cjs');
    writeFileSync(probe, PROBE);
    const out = join(dir, `${name}.young`);
    const end = await runNode(BIN, args, { NODE_OPTIONS: `--require ${probe}`, BERTH_TEST_YOUNG_OUT: out });
    // No store there: the command fails after the bundle has loaded, which is all this needs.
    expect(end.code, end.stderr).toBe(1);
    expect(Number(readFileSync(out, 'utf8'))).toBeLessThanOrEqual(2 * 1024 * 1024);
  });
});

describe('the berth command, started as a user starts it (the bin, by its first line)', () => {
  it('runs V8 with no optimising-compiler threads, whose malloc arenas a long run kept', async () => {
    const probe = join(dir, 'argv.cjs');
    const out = join(dir, 'argv.json');
    writeFileSync(probe, `process.on('exit', () => require('node:fs').writeFileSync(process.env.BERTH_TEST_ARGV_OUT, JSON.stringify(process.execArgv)));`);
    // The file itself, not `node FILE`: what `berth` (npm's link to it) runs.
    const code = await new Promise<number | null>((resolve) =>
      execFile(BIN, ['status', '--store', join(dir, 'none.db')], { env: { ...process.env, NODE_OPTIONS: `--require ${probe}`, BERTH_TEST_ARGV_OUT: out } }, (err) =>
        resolve(err ? ((err as { code?: number }).code ?? null) : 0),
      ),
    );
    expect(code).toBe(1);
    expect(JSON.parse(readFileSync(out, 'utf8'))).toContain('--no-concurrent-recompilation');
  });
});
