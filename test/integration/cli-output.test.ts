import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { bundledCli } from '../support/plan-fixture';

/** `berth ARGS` with its stdout read end closed at once, as `berth … | head -0` leaves it. */
async function withClosedStdout(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [await bundledCli(), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.destroy();
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const code = await new Promise<number | null>((r) => child.once('close', (c) => r(c)));
  return { code, stderr };
}

describe('the CLI as the end of a pipe', { timeout: 60_000 }, () => {
  it('says nothing and ends normally when the reader of its output stops reading (berth … | head)', async () => {
    // Before: "berth: internal error (a bug): Error: write EPIPE" with a stack, exit 1.
    const end = await withClosedStdout(['--help']);
    expect(end.stderr).toBe('');
    expect(end.code).toBe(0);
  });
});
