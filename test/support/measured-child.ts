import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** How a measured child ended: its exit, its output (stderr only as a byte count and a tail), its peak RSS and wall time. */
export interface MeasuredEnd {
  code: number | null;
  stdout: string;
  stderrBytes: number;
  stderrTail: string;
  /** The child's VmHWM (peak resident set) in MB, the highest seen while it ran. */
  peakRssMb: number;
  wallMs: number;
}

const hwmKb = (pid: number): number => {
  try {
    const m = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0; // already gone
  }
};

/**
 * Runs `node script args` and measures it: VmHWM is a high-water mark, so reading it every 50 ms and
 * keeping the highest value sees the peak unless it came in the child's last 50 ms. Stderr is
 * counted and only its tail kept, so a child printing hundreds of MB costs the test nothing.
 * `stallStderrUntilStdout` leaves stderr unread (the pipe fills) until stdout matches.
 */
export function runNodeMeasured(
  script: string,
  args: string[],
  env: Record<string, string>,
  timeoutMs: number,
  o: { stallStderrUntilStdout?: RegExp } = {},
): Promise<MeasuredEnd> {
  const started = Date.now();
  const child = spawn(process.execPath, [script, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let peak = 0;
  const poll = setInterval(() => {
    peak = Math.max(peak, hwmKb(child.pid!));
  }, 50);
  const kill = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  let stdout = '';
  let stderrBytes = 0;
  let stderrTail = '';
  // A terminal that stops reading: stderr is not read until stdout shows the pattern.
  if (o.stallStderrUntilStdout) child.stderr.pause();
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    stdout = (stdout + d).slice(-(1 << 20));
    if (o.stallStderrUntilStdout?.test(stdout)) child.stderr.resume();
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    stderrBytes += Buffer.byteLength(d);
    stderrTail = (stderrTail + d).slice(-8192);
  });
  return new Promise((resolve) => {
    child.on('close', (code) => {
      clearInterval(poll);
      clearTimeout(kill);
      resolve({ code, stdout, stderrBytes, stderrTail, peakRssMb: peak / 1024, wallMs: Date.now() - started });
    });
  });
}
