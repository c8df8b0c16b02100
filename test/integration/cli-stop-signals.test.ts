import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/** Starts the child, waits for `line` on its stdout before each signal, and returns how it ended. */
async function signalled(signals: NodeJS.Signals[]): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(__dirname, '../support/stop-signals-child.ts'), 'run_0123'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const waiters: Array<{ text: string; resolve: () => void }> = [];
  child.stdout.on('data', (d: Buffer) => {
    stdout += d.toString();
    for (const w of waiters.splice(0)) (stdout.includes(w.text) ? w.resolve() : waiters.push(w));
  });
  const seen = (text: string) => new Promise<void>((resolve) => (stdout.includes(text) ? resolve() : waiters.push({ text, resolve })));
  const ended = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  await seen('ready');
  for (const [i, s] of signals.entries()) {
    // The second signal only once the first one's stop began: two at once can merge into one.
    if (i > 0) await seen(`stopping on ${signals[0]}`);
    child.kill(s);
  }
  if (signals.length === 1) {
    await seen(`stopping on ${signals[0]}`);
    child.kill('SIGKILL');
  }
  return { ...(await ended), stdout, stderr };
}

describe('the stop signals of a command that drives a run', { timeout: 30_000 }, () => {
  it('a first Ctrl-C starts the stop and does not quit the process', async () => {
    const r = await signalled(['SIGINT']);
    // Still alive after its stop began: the test had to kill it.
    expect(r.signal).toBe('SIGKILL');
    expect(r.stderr).not.toContain('quitting at once');
  });

  it('a second Ctrl-C while stopping quits at once with exit 130, saying what is left and how to continue', async () => {
    const r = await signalled(['SIGINT', 'SIGINT']);
    expect(r.code).toBe(130);
    expect(r.stderr).toContain('SIGINT again while stopping: quitting at once');
    expect(r.stderr).toContain('berth resume run_0123');
  });

  it('a SIGTERM after a Ctrl-C quits the same way', async () => {
    const r = await signalled(['SIGINT', 'SIGTERM']);
    expect(r.code).toBe(130);
    expect(r.stderr).toContain('SIGTERM again while stopping');
  });
});
