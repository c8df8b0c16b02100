import type Dockerode from 'dockerode';
import { setTimeout as sleep } from 'node:timers/promises';
import { FrameDemuxer } from './docker-frames';
import { CONTROL_SCRIPT, parseControlReport, type ControlReport } from './exec-scripts';
import { enterExecSetup } from './exec-gate';
import { unlessPaused } from './paused-wait';

const ATTEMPTS = 25;

/** What a control exec is to do; see CONTROL_SCRIPT. */
export type ControlAction = { mode: 'counters' } | { mode: 'tree'; target: string } | { mode: 'sweep' } | { mode: 'earlier'; spare: string[] };

/**
 * Runs the control script (kill a command's tree, sweep leftovers, and read the pids and OOM
 * counters) in a second exec. Starting that exec needs one free pid; under a fork bomb the runtime's fork can
 * fail, so it is retried: a bomb at the pids limit keeps losing members and frees slots within
 * milliseconds.
 */
export async function runControl(
  container: Dockerode.Container,
  opts: { user: string; action: ControlAction },
): Promise<ControlReport> {
  const a = opts.action;
  const args = a.mode === 'tree' ? [a.mode, a.target] : a.mode === 'earlier' ? [a.mode, ...a.spare] : [a.mode];
  let lastErr: unknown;
  for (let attempt = 0; attempt < ATTEMPTS; attempt += 1) {
    try {
      const report = parseControlReport(await runScript(container, CONTROL_SCRIPT, args, opts.user));
      // An exec that could not fork its shell exits non-zero with no report; try again.
      if (!report.complete) {
        lastErr = new Error('control exec produced no report');
        await sleep(20 + attempt * 20);
        continue;
      }
      return report;
    } catch (err) {
      lastErr = err;
      const status = (err as { statusCode?: number }).statusCode;
      // 404/409: the container is gone or stopped; there is nothing left to kill (a paused one was
      // waited for in runScript: a commit's pause must not pass for a stopped sandbox).
      if (status === 404 || status === 409) return { killed: undefined, found: false, pidsMax: undefined, oomKill: undefined, complete: true };
      await sleep(20 + attempt * 20);
    }
  }
  throw lastErr instanceof Error ? lastErr : new Error(String(lastErr));
}

/** Runs a shell script (`$0` = first arg) as `user` and returns its stdout; for one-off control work. */
export async function runScript(container: Dockerode.Container, script: string, args: string[], user: string): Promise<string> {
  // The whole exec is its setup here (a short script): no pause of this process meets it (see exec-gate.ts).
  const leave = await enterExecSetup(container.id);
  try {
    return await runScriptStream(container, script, args, user);
  } finally {
    leave();
  }
}

async function runScriptStream(container: Dockerode.Container, script: string, args: string[], user: string): Promise<string> {
  const stream = await unlessPaused(container, async () => {
    const exec = await container.exec({ Cmd: ['/bin/sh', '-c', script, ...args], User: user, AttachStdout: true, AttachStderr: true, Tty: false });
    return (await exec.start({ hijack: true, stdin: false })) as NodeJS.ReadWriteStream;
  });
  const out: Buffer[] = [];
  const demux = new FrameDemuxer((s, chunk) => {
    if (s === 'stdout') out.push(Buffer.from(chunk));
  });
  await new Promise<void>((resolve, reject) => {
    stream.on('data', (d: Buffer) => demux.push(d));
    stream.on('end', resolve);
    stream.on('close', resolve);
    stream.on('error', reject);
  });
  return Buffer.concat(out).toString('utf8');
}
