import { randomBytes } from 'node:crypto';

let lastMs = 0;
let counter = 0;

/**
 * A time-ordered id: `prefix_` + 12 hex digits of milliseconds + 4 of a per-ms counter + 8 random.
 * Sorting ids of one process sorts them by creation, which keeps listings stable.
 */
export function newId(prefix: string): string {
  const ms = Date.now();
  if (ms === lastMs) counter += 1;
  else {
    lastMs = ms;
    counter = 0;
  }
  return `${prefix}_${ms.toString(16).padStart(12, '0')}${(counter & 0xffff).toString(16).padStart(4, '0')}${randomBytes(4).toString('hex')}`;
}

/** The creation time (ms) a {@link newId} id carries, or undefined when `id` is not one. */
export function idTimeMs(id: string): number | undefined {
  const m = /^[a-z]+_([0-9a-f]{12})[0-9a-f]{12}$/.exec(id);
  return m ? parseInt(m[1]!, 16) : undefined;
}
