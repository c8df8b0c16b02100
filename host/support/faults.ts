import { appendFileSync, existsSync, writeFileSync } from 'node:fs';
import { BerthError } from '../errors';

/**
 * Named fault points at commit boundaries. A test arms them through the environment of a child
 * process and the process SIGKILLs itself exactly there:
 *
 * - `BERTH_FAULT_AT=n`     kill at the n-th boundary hit of this process (1-based, any name);
 * - `BERTH_FAULT=name[#k]` kill at the k-th hit (default 1st) of the boundary named `name`;
 * - `BERTH_FAULT_LOG=file` append `<hit number> <name>` per hit, so a test can enumerate every boundary;
 * - `BERTH_FAULT_ARM=mark` with `BERTH_FAULT=name#k`: kill at the first hit of `name` that is its
 *   k-th or later and comes once the {@link faultMark} `mark` was passed: a kill that must follow
 *   work running beside the boundaries (a background pass) lands after it whatever the machine's speed.
 *
 * {@link faultHold} points hold the process instead, to order it against another one:
 * - `BERTH_FAULT_HOLD=name=path[,name=path…]` at `name`, write `path.held` and wait until `path` exists.
 *
 * {@link faultError} points instead throw, for failures the host must survive without dying:
 * - `BERTH_FAULT_ERROR=name[#k][,name#k…]` throw a retryable `engine_error` at the k-th hit of `name`.
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
const armName = env.BERTH_FAULT_ARM;
let armed = !armName;

export function faultPoint(name: string): void {
  hits += 1;
  if (logFile) appendFileSync(logFile, `${hits} ${name}\n`);
  if (atHit === hits) die();
  if (atName && atName === name) {
    const n = (named.get(name) ?? 0) + 1;
    named.set(name, n);
    if (armName ? armed && n >= nameNth : n === nameNth) die();
  }
}

/**
 * A kill point inside work that runs beside the commit boundaries (retention, a background pass):
 * `BERTH_FAULT=name[#k]` kills there as at a {@link faultPoint}, but it is not a numbered boundary
 * (`BERTH_FAULT_AT` and `BERTH_FAULT_LOG` do not see it), so suites that kill at every boundary
 * neither gain kills from it nor see their numbering move with how much such work there was.
 */
export function faultAside(name: string): void {
  if (!atName || atName !== name) return;
  const n = (named.get(name) ?? 0) + 1;
  named.set(name, n);
  if (armName ? armed && n >= nameNth : n === nameNth) die();
}

/**
 * A point in work that runs beside the commit boundaries (a background pass): never a kill and not
 * counted among the boundaries (their numbering must not depend on the pass's speed); it only arms
 * `BERTH_FAULT` when `BERTH_FAULT_ARM` names it.
 */
export function faultMark(name: string): void {
  if (name === armName) armed = true;
}

function die(): never {
  process.kill(process.pid, 'SIGKILL');
  // SIGKILL is delivered asynchronously; never let the caller go on to the next write.
  for (;;) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1000);
}

const errorTargets = new Map<string, number[]>();
for (const t of (env.BERTH_FAULT_ERROR ?? '').split(',').filter(Boolean)) {
  const [name, nth] = t.split('#');
  errorTargets.set(name!, [...(errorTargets.get(name!) ?? []), nth ? Number(nth) : 1]);
}
const errorHits = new Map<string, number>();

/**
 * A named point where a test can inject a retryable failure (as an engine 5xx or a connection
 * reset would be): throws at the hits `BERTH_FAULT_ERROR` names, does nothing otherwise.
 */
export function faultError(name: string): void {
  const wanted = errorTargets.get(name);
  if (!wanted) return;
  const n = (errorHits.get(name) ?? 0) + 1;
  errorHits.set(name, n);
  if (wanted.includes(n)) throw new BerthError('engine_error', `injected fault at ${name} (hit ${n})`, { retryable: true });
}

const holds = new Map((env.BERTH_FAULT_HOLD ?? '').split(',').filter(Boolean).map((t) => [t.slice(0, t.indexOf('=')), t.slice(t.indexOf('=') + 1)] as const));

/**
 * A point where a test holds this process until it lets it go: a race between two processes (a
 * claim taken between another command's read and its own claim) replayed in a fixed order, with
 * no sleep. Armed by `BERTH_FAULT_HOLD`, it writes `path.held` (the process reached the point) and
 * resolves once `path` exists; unarmed, it resolves at once.
 */
export async function faultHold(name: string): Promise<void> {
  const path = holds.get(name);
  if (!path) return;
  writeFileSync(`${path}.held`, String(process.pid));
  while (!existsSync(path)) await new Promise((r) => setTimeout(r, 25));
}
