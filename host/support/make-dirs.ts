import { mkdirSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { BerthError } from '../errors';

/**
 * Makes `dir` and its missing parents directories, one level at a time, or throws `code` saying why
 * it cannot. Node's recursive mkdir loops for ever on a path it cannot create under /proc (a
 * `--store`, `--token-file` or `artifacts --out` there spun at full CPU), and a file in the way
 * surfaced as a bare ENOTDIR.
 * @param what the path as the user knows it, for the message.
 */
export function makeDirectories(dir: string, code: string, what: string): void {
  const missing: string[] = [];
  for (let at = dir; ; at = dirname(at)) {
    let isDir: boolean | null;
    try {
      isDir = statSync(at).isDirectory();
    } catch (err) {
      const c = (err as NodeJS.ErrnoException).code;
      if (c !== 'ENOENT' && c !== 'ENOTDIR') throw new BerthError(code, `cannot use ${what}: cannot read ${at} (${c ?? (err as Error).message})`, { details: { path: what } });
      isDir = null;
    }
    if (isDir) break;
    if (isDir === false) throw new BerthError(code, `cannot use ${what}: ${at} is a file, not a directory`, { details: { path: what } });
    missing.unshift(at);
    if (dirname(at) === at) break;
  }
  for (const d of missing) {
    try {
      mkdirSync(d);
    } catch (err) {
      const c = (err as NodeJS.ErrnoException).code;
      if (c !== 'EEXIST') throw new BerthError(code, `cannot use ${what}: cannot create ${d} (${c ?? (err as Error).message})`, { details: { path: what } });
    }
  }
}
