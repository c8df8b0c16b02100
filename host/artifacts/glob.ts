/**
 * Artifact globs: workspace-relative patterns with `*` (any characters but `/`), `?` (one), `[…]`
 * (a class; `[!…]` negates) and `**` as a whole segment (any number of directories, also none).
 * Matching runs on the host over a listing from the sandbox, so no shell ever expands them.
 */

const MAGIC = /[*?[]/;

/** Why `glob` is not an artifact glob, or undefined when it is one. */
export function globProblem(glob: string): string | undefined {
  if (glob.length === 0) return 'an empty pattern';
  if (glob.includes('\0') || glob.includes('\n')) return 'a NUL byte or newline';
  if (glob.startsWith('/')) return 'an absolute path';
  if (glob.includes('\\')) return 'a backslash';
  const parts = glob.split('/');
  if (parts.includes('..')) return 'a ".." component';
  if (parts.some((p) => p === '')) return 'an empty component ("//" or a trailing "/")';
  return undefined;
}

/** The segments of a valid glob, `.` segments dropped. */
const segments = (glob: string) => glob.split('/').filter((p) => p !== '.');

function segmentSource(seg: string): string {
  let out = '';
  for (let i = 0; i < seg.length; i += 1) {
    const c = seg[i]!;
    if (c === '*') out += '[^/]*';
    else if (c === '?') out += '[^/]';
    else if (c === '[') {
      const end = seg.indexOf(']', i + 2);
      if (end === -1) out += '\\[';
      else {
        let body = seg.slice(i + 1, end);
        if (body.startsWith('!')) body = `^${body.slice(1)}`;
        out += `[${body.replace(/\\/g, '\\\\')}]`;
        i = end;
      }
    } else out += c.replace(/[.+^${}()|\]\\]/g, '\\$&');
  }
  return out;
}

/** A regular expression matching workspace-relative paths (no leading `./`) against `glob`. */
export function globRegExp(glob: string): RegExp {
  const segs = segments(glob);
  let src = '';
  segs.forEach((seg, i) => {
    const last = i === segs.length - 1;
    if (seg === '**') src += last ? '.*' : '(?:[^/]+/)*';
    else src += segmentSource(seg) + (last ? '' : '/');
  });
  // dotAll: a trailing `**` takes every name below, also one that holds a newline (as `*` does).
  return new RegExp(`^${src}$`, 's');
}

/**
 * Where to list for `glob`: the directory of its leading literal segments and how deep below it a
 * match can lie (undefined with `**`), so `out/*.a` lists only `out/`, one level.
 */
export function globRoot(glob: string): { dir: string; maxDepth?: number } {
  const segs = segments(glob);
  let n = 0;
  while (n < segs.length - 1 && !MAGIC.test(segs[n]!)) n += 1;
  const rest = segs.slice(n);
  return { dir: segs.slice(0, n).join('/'), ...(rest.includes('**') ? {} : { maxDepth: rest.length }) };
}
