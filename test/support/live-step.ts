import { spawn, type ChildProcess } from 'node:child_process';
import { bundledCli } from './plan-fixture';

/** A step printing a line a second until the test drops /tmp/release into its sandbox (or 150 s pass). */
export const TICKING = 'i=0; while [ ! -e /tmp/release ]; do i=$((i+1)); echo tick $i; [ $i -ge 150 ] && exit 3; sleep 1; done; echo released';

/** What a test undoes after itself, last pushed first; `run` never throws (each failure is printed). */
export class Cleanups {
  private readonly list: Array<() => Promise<void>> = [];
  push(c: () => Promise<void>): void {
    this.list.push(c);
  }
  async run(): Promise<void> {
    for (const c of this.list.splice(0).reverse()) await c().catch((e: unknown) => console.error(e));
  }
}

/** Polls `fn` every 100 ms until it gives a value (a throw counts as not yet), failing after `ms`. */
export async function waitFor<T>(what: string, fn: () => Promise<T | undefined | false>, ms = 150_000): Promise<T> {
  for (let waited = 0; ; waited += 100) {
    const v = await fn().catch(() => undefined);
    if (v) return v;
    if (waited > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A bundled `berth` child on the fixture's store, SIGKILLed at cleanup if it still runs. */
export async function cliChild(fx: { store: string; hostId: string }, args: string[], cleanups: Cleanups): Promise<{ child: ChildProcess; ended: Promise<number | null> }> {
  const child = spawn(process.execPath, [await bundledCli(), ...args, '--store', fx.store], { env: { ...process.env, BERTH_HOST_ID: fx.hostId, BERTH_OPERATOR: 'tester' }, stdio: 'ignore' });
  cleanups.push(async () => void (child.exitCode === null && child.signalCode === null && child.kill('SIGKILL')));
  return { child, ended: new Promise((r) => child.on('exit', (code) => r(code))) };
}
