import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { processAlive } from '../../host/support/process-alive';

const state = (pid: number) => {
  const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  return stat.charAt(stat.lastIndexOf(')') + 2);
};

describe('processAlive', () => {
  it('reads a running process as alive, and one that exited but was never reaped (a zombie) or is gone as dead', async () => {
    // `exec sleep` never waits for the child the shell started: the child stays a zombie.
    const parent = spawn('sh', ['-c', 'sh -c "sleep 60" & echo $!; exec sleep 60'], { stdio: ['ignore', 'pipe', 'ignore'] });
    try {
      const child = Number(await new Promise<string>((resolve) => parent.stdout.once('data', (d: Buffer) => resolve(d.toString().trim()))));
      expect(processAlive(child)).toBe(true);
      expect(processAlive(process.pid)).toBe(true);
      process.kill(child, 'SIGKILL');
      while (state(child) !== 'Z') await sleep(10);
      // Before: true (kill(pid, 0) succeeds on a zombie).
      expect(processAlive(child)).toBe(false);
      parent.kill('SIGKILL');
      await new Promise((r) => parent.once('exit', r));
      expect(processAlive(parent.pid!)).toBe(false);
    } finally {
      parent.kill('SIGKILL');
    }
  });
});
