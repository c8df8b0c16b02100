import { appendFileSync } from 'node:fs';

/**
 * Named fault points at commit boundaries. A test arms them through the environment of a child
 * process and the process SIGKILLs itself exactly there:
 *
 * - `BERTH_FAULT_AT=n`     kill at the n-th boundary hit of this process (1-based, any name);
 * - `BERTH_FAULT=name[#k]` kill at the k-th hit (default 1st) of the boundary named `name`;
 * - `BERTH_FAULT_LOG=file` append `<hit number> <name>` per hit, so a test can enumerate every boundary.
 *
 * Unarmed, a fault point costs one counter increment.
 */
let hits = 0;
const named = new Map<string, number>();
const env = process.env;
const atHit = env.BERTH_FAULT_AT ? Number(env.BERTH_FAULT_AT) : undefined;
const [atName, atNth] = (env.BERTH_FAULT ?? '').split('#');
const nameNth = atNth ? Number(atNth) : 1;
const logFile = env.BERTH_FAULT_LOG;

export function faultPoint(name: string): void {
  hits += 1;
  if (logFile) appendFileSync(logFile, `${hits} ${name}\n`);
  if (atHit === hits) die();
  if (atName && atName === name) {
    const n = (named.get(name) ?? 0) + 1;
    named.set(name, n);
    if (n === nameNth) die();
  }
}

function die(): never {
  process.kill(process.pid, 'SIGKILL');
  // SIGKILL is delivered asynchronously; never let the caller go on to the next write.
  for (;;) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1000);
}
