import { lstatSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { processAlive } from '../support/process-alive';

/**
 * Removes what an export killed before it finished left in `dir`: entries named `<prefix><pid>`
 * (the record half written beside `--out FILE`), or `<prefix><pid>-<random>` with `random` (the
 * temporary directory of an export to stdout), whose process no longer exists. Only this user's entries, and
 * never one of a live process: another export to the same file may be writing it now. Best
 * effort: what cannot be removed is left for the next export.
 */
export function removeStalePartials(dir: string, prefix: string, o: { random?: boolean } = {}): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const removed: string[] = [];
  const uid = process.getuid?.();
  for (const name of names) {
    if (!name.startsWith(prefix)) continue;
    const m = (o.random ? /^(\d+)-.+$/ : /^(\d+)$/).exec(name.slice(prefix.length));
    const pid = m ? Number(m[1]) : NaN;
    if (!Number.isSafeInteger(pid) || pid <= 0 || pid === process.pid || processAlive(pid)) continue;
    const path = join(dir, name);
    try {
      const st = lstatSync(path);
      if (uid !== undefined && st.uid !== uid) continue;
      rmSync(path, { recursive: st.isDirectory(), force: true });
      removed.push(path);
    } catch {
      // Gone meanwhile, or not ours to remove.
    }
  }
  return removed;
}
