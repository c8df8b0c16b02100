import { createHash } from 'node:crypto';
import { closeSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { processAlive as alive } from '../support/process-alive';

/** Pushes of one image under one name that this process runs now, per engine: a second caller joins the first. */
const inFlight = new Map<string, Promise<unknown>>();

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A holder alive but stuck this long (frozen, SIGSTOPped) no longer holds the others up: they push without the lock. */
const LOCK_WAIT_MAX_MS = 10 * 60_000;

/**
 * Holds the machine-wide lock of `key` (a file created exclusively, naming the holder's pid) while
 * `fn` runs. A lock whose holder died is taken over. Two processes pushing the same `repo:tag`
 * through one engine would otherwise race on the local tag: one removes it in its clean-up while
 * the other is still pushing it, and that push fails half way.
 */
async function withFileLock<T>(key: string, fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
  const dir = join(tmpdir(), 'berth-push-locks');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, createHash('sha256').update(key).digest('hex').slice(0, 32));
  const since = Date.now();
  for (;;) {
    signal?.throwIfAborted();
    if (Date.now() - since > LOCK_WAIT_MAX_MS) return fn();
    try {
      const fd = openSync(file, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const holder = Number(readFileSafe(file));
      // An empty file is a holder between its create and its write: wait for it.
      if (Number.isInteger(holder) && holder > 0 && !alive(holder)) {
        try {
          unlinkSync(file);
        } catch {
          // another waiter removed it first
        }
        continue;
      }
      await sleep(100);
    }
  }
  try {
    return await fn();
  } finally {
    try {
      if (readFileSafe(file) === String(process.pid)) unlinkSync(file);
    } catch {
      // gone already
    }
  }
}

function readFileSafe(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

/**
 * One push of `ref` through `engine` at a time on this machine: callers in this process share the
 * push in flight; other processes wait for the lock and then push (the registry has every layer by
 * then, so theirs costs a manifest check).
 */
export function sharedPush<T>(engine: string, ref: string, push: () => Promise<T>, signal?: AbortSignal): Promise<T> {
  const key = `${engine} ${ref}`;
  const running = inFlight.get(key) as Promise<T> | undefined;
  if (running) return running;
  const p = withFileLock(key, push, signal).finally(() => inFlight.delete(key));
  inFlight.set(key, p);
  return p;
}
