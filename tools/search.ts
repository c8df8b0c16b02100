import { z } from 'zod';
import { shellQuote } from './shell-quote';
import type { ToolDefinition } from './tool';
import { confinedPrelude, confineRefusal } from './workspace-confine';

const Input = z.strictObject({
  pattern: z.string().min(1).describe('A basic regular expression (grep syntax); set fixed=true for a literal string'),
  path: z.string().min(1).default('.').describe('File or directory to search, relative to the workspace'),
  fixed: z.boolean().optional().describe('Treat pattern as a literal string'),
  ignore_case: z.boolean().optional(),
});
export type SearchInput = z.infer<typeof Input>;

const MAX_LINES = 500;
/** Lines of output read: a match takes one (more if its path holds newlines), the end mark one. */
const READ_LINES = MAX_LINES + 2;

/*
 * The output, one stream read by {@link searchMatches}, a record per match:
 * - `path:line:text\n`, grep's own line, for a path with no control character, colon or double
 *   quote: its path ends at the first colon.
 * - `\x01PATH\0line:text\n` for a path that holds one: a newline would split grep's line
 *   (`x\n/etc/passwd:1:root:...` read as a match in /etc/passwd), a colon moves the line number
 *   (`a:1:b.txt:3:x` read as file `a`, line 1), and a leading quote would read as a quoted path. A
 *   path holds no NUL, grep's text no newline, and no plain record starts with a control character,
 *   so no file name can forge another file's match.
 * - `\x02\n` once find is done: output without it was cut by head, so there may be more matches.
 */
const MARKED = '\x01';
const END = '\x02\n';

/** Shell that splits words at newlines only and never globs: `for m in $r` walks grep's lines as they are. */
const SH_NEWLINE = "nl='\n'; IFS=$nl; set -f";

/**
 * Marks the matches of the files given, whose paths hold a colon, a double quote or a control
 * character other than a newline, with two greps for them all: grep -c's `path:count` lines (the
 * count after the last colon) say how many of grep -n's lines, which come in the same order, each
 * file has, so the path known is cut off each line, never guessed at (a line that does not start
 * with it, a file changed between the greps, is left out). With builtins: IFS a newline, no
 * globbing. `|| exit`: head has read enough (where SIGPIPE is ignored).
 */
function markScript(flags: string, pattern: string): string {
  const greps = (opts: string) => `grep ${opts} -m ${MAX_LINES + 1} ${flags} -e ${pattern} "$@"`;
  return [
    SH_NEWLINE,
    `r=$(${greps('-nH')} | head -n ${MAX_LINES + 1}); [ -n "$r" ] || exit 0`,
    // -s: the first grep already said why a file could not be read.
    // The counts as the arguments, taken one by one with shift: cutting lines off a string is quadratic in ash.
    `c=$(${greps('-csH')}); set -- $c; k=0`,
    'for m in $r; do',
    '  while [ "$k" -le 0 ]; do [ $# -gt 0 ] || exit 0; f=${1%:*}; k=${1##*:}; shift; done',
    '  k=$((k-1))',
    `  case $m in "$f:"*) printf '\\001%s\\000%s\\n' "$f" "\${m#"$f:"}" || exit 0;; esac`,
    'done',
  ].join('\n');
}

/**
 * Marks the matches of the files given, whose paths hold a newline (so grep -c's lines cannot be
 * split): a grep per file, but only for the files `grep -l` named (found in its output by substring:
 * a false hit costs a grep that prints nothing). `-s`: grep -l already said why a file could not be read.
 */
function markEachScript(flags: string, pattern: string): string {
  return [
    SH_NEWLINE,
    `l=$(grep -l ${flags} -e ${pattern} "$@"; echo .)`,
    'for f; do',
    `  case $l in *"$f"*) r=$(grep -s -nh -m ${MAX_LINES + 1} ${flags} -e ${pattern} "$f") || continue`,
    "    for m in $r; do printf '\\001%s\\000%s\\n' \"$f\" \"$m\" || exit 0; done;; esac",
    'done',
  ].join('\n');
}

/** A path as find printed it, as the answer shows it (relative to the workspace). */
const relative = (path: string) => path.replace(/^\.\//, '');

/**
 * The matches in the search command's output, each `path:line:text` with a path that needs it
 * quoted as a JSON string (`"a:1:b.txt":3:text`, `"two\nlines.txt":1:ab`); `complete` when the
 * output was not cut.
 */
export function searchMatches(out: string): { lines: string[]; complete: boolean } {
  const lines: string[] = [];
  for (let i = 0; i < out.length; ) {
    if (out.startsWith(END, i)) return { lines, complete: true };
    const nul = out[i] === MARKED ? out.indexOf('\0', i) : i;
    const nl = nul < 0 ? -1 : out.indexOf('\n', nul);
    if (nl < 0) break;
    lines.push(nul === i ? relative(out.slice(i, nl)) : `${JSON.stringify(relative(out.slice(i + 1, nul)))}:${out.slice(nul + 1, nl)}`);
    i = nl + 1;
  }
  return { lines, complete: false };
}

/** `search`: grep over the workspace, `path:line:text` per match. Reads only, so replay `safe`. */
export const search: ToolDefinition<SearchInput> = {
  name: 'search',
  description:
    'Search workspace files for a pattern (grep -rn). Returns "path:line:text" per matching line, at most 500 lines; ' +
    'a path holding a colon, a double quote or a control character is a JSON string ("a:1:b.txt":3:text).',
  input: Input,
  replay: 'safe',
  mutates: false,
  contextCap: 12_000,
  async run(ctx, args) {
    const flags = ['-I', args.fixed ? '-F' : '', args.ignore_case ? '-i' : ''].filter(Boolean).join(' ');
    const pattern = shellQuote(args.pattern);
    // Not `grep -r`: busybox's follows a symlink to a file anywhere in the tree (`ln -s /etc/shadow x`
    // searched /etc/shadow). find -H follows only the path argument, which the prelude confined.
    // One find, batched execs (busybox flushes a `-exec +` only outside parentheses): plain paths go
    // to one grep as before, the others to a marking script.
    const cmd = [
      confinedPrelude(args.path),
      // The bytes themselves, not $(printf ...): a fork less each.
      `lined=${shellQuote('*\n*')}; odd=${shellQuote('*[\x01-\x1f\x7f:"]*')}`,
      `{ find -H "$p" -type f -path "$lined" -exec sh -c ${shellQuote(markEachScript(flags, pattern))} sh {} +` +
        ` -o -type f -path "$odd" -exec sh -c ${shellQuote(markScript(flags, pattern))} sh {} +` +
        ` -o -type f -exec grep -nH ${flags} -e ${pattern} {} +; printf '\\002\\n'; } | head -n ${READ_LINES}`,
    ].join('\n');
    const r = await ctx.sandbox.exec(['sh', '-c', cmd], { signal: ctx.signal, timeoutMs: ctx.commandTimeoutMs });
    const refused = confineRefusal(r, args.path);
    if (refused) return refused;
    const { lines, complete } = searchMatches(r.stdout);
    if (lines.length === 0 && (complete || !r.stdout)) {
      // grep exits 1 for "no match" and 2 for an error; only the error is the call's fault.
      // Once each: the plain and the marked paths' greps both say so of a bad pattern.
      const err = [...new Set(r.stderr.trim().split('\n'))].join('\n');
      return err ? { content: `error: ${err}`, isError: true, refused: true } : { content: 'no matches', isError: false };
    }
    const shown = lines.slice(0, MAX_LINES);
    // Cut output may end in a file whose name alone took the lines read: say so, not "no matches".
    const more = lines.length > MAX_LINES || !complete ? [`[... more matches not shown ...]`] : [];
    return { content: [...shown, ...more].join('\n'), isError: false, detail: { matches: shown.length } };
  },
};
