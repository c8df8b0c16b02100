import { execFileSync, spawn } from 'node:child_process';
import { existsSync, openSync, readFileSync } from 'node:fs';

const SOCK = '/var/run/docker.sock';
const PIDFILE = '/var/run/docker.pid';

function ping(): boolean {
  try {
    execFileSync('curl', ['-sf', '--max-time', '2', '--unix-socket', SOCK, 'http://d/_ping'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

async function until(cond: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Stops the local dockerd (as .ci/setup started it) and waits until it is gone. */
export async function stopDockerd(): Promise<void> {
  const pid = Number(readFileSync(PIDFILE, 'utf8').trim());
  process.kill(pid, 'SIGTERM');
  await until(() => !existsSync(`/proc/${pid}`), 60_000, 'dockerd to exit');
}

/** Starts dockerd the way .ci/setup does, and waits for /_ping. */
export async function startDockerd(): Promise<void> {
  if (ping()) return;
  const log = openSync('/var/log/dockerd.log', 'a');
  spawn('dockerd', ['-H', `unix://${SOCK}`, '--pidfile', PIDFILE], { detached: true, stdio: ['ignore', log, log] }).unref();
  await until(ping, 60_000, 'dockerd to answer /_ping');
}
