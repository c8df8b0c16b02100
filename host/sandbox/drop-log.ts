import { constants, close, open, read } from 'node:fs';
import { promisify } from 'node:util';

const openAsync = promisify(open);
const readAsync = promisify(read);
const closeAsync = promisify(close);

/** Log prefixes of the LOG rules Berth installs; a kernel line carrying one is a packet Berth refused. */
export const DROP_PREFIX = { proxy: 'berth-proxy ', drop: 'berth-drop ' } as const;
export type DropKind = keyof typeof DROP_PREFIX;

/** One packet a Berth LOG rule saw, just before its REJECT or DROP. */
export interface DropLine {
  kind: DropKind;
  /** Interface the packet came in on (a sandbox bridge, docker0, lo, ...). */
  in: string;
  /** Interface it was to leave by: empty for a packet to the host itself (INPUT), set for one being forwarded. */
  out: string;
  src: string;
  dst: string;
  proto: string;
  sport: number;
  dport: number;
}

/** Parses one `/dev/kmsg` record (`prio,seq,usec,flags;text`); undefined for anything not Berth's. */
export function parseDropLine(record: string): DropLine | undefined {
  const text = record.slice(record.indexOf(';') + 1);
  const kind = (Object.keys(DROP_PREFIX) as DropKind[]).find((k) => text.startsWith(DROP_PREFIX[k]));
  if (!kind) return undefined;
  const field = (k: string) => new RegExp(`(?:^| )${k}=(\\S*)`).exec(text)?.[1] ?? '';
  return { kind, in: field('IN'), out: field('OUT'), src: field('SRC'), dst: field('DST'), proto: field('PROTO'), sport: Number(field('SPT') || 0), dport: Number(field('DPT') || 0) };
}

/**
 * Follows the kernel log (`/dev/kmsg`, where the LOG rules write) and hands every Berth line to
 * `onLine`. Opened non-blocking and polled, so no thread of the pool ever waits in a read. What
 * was in the buffer before it opened is skipped: those lines belong to earlier processes.
 * Returns undefined when the log cannot be read (not root, no /dev/kmsg): drops are then counted
 * by nobody, which the caller logs.
 */
export async function followDropLog(onLine: (l: DropLine) => void, pollMs = 500, path = '/dev/kmsg'): Promise<{ stop(): Promise<void>; poll(): Promise<void> } | undefined> {
  let fd: number;
  try {
    fd = await openAsync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  const buf = Buffer.alloc(16 * 1024);
  /** Reads every record now in the buffer; each read returns exactly one. */
  const drain = async (deliver: boolean): Promise<void> => {
    for (;;) {
      let n: number;
      try {
        n = (await readAsync(fd, buf, 0, buf.length, null)).bytesRead;
      } catch (err) {
        // EPIPE: records were overwritten before we read them; the next read goes on after them.
        if ((err as NodeJS.ErrnoException).code === 'EPIPE') continue;
        return;
      }
      if (n <= 0) return;
      if (!deliver) continue;
      const line = parseDropLine(buf.toString('utf8', 0, n).split('\n')[0]!);
      if (line) onLine(line);
    }
  };
  await drain(false);
  let stopped = false;
  let running = Promise.resolve();
  // One drain at a time: records are read in order, and the fd is closed only after the last.
  const poll = () => (running = running.then(() => (stopped ? undefined : drain(true))));
  const timer = setInterval(() => void poll(), pollMs);
  timer.unref();
  return {
    poll,
    async stop() {
      await poll();
      stopped = true;
      clearInterval(timer);
      await running;
      await closeAsync(fd).catch(() => {});
    },
  };
}
