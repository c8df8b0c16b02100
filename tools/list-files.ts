import { z } from 'zod';
import type { ToolDefinition } from './tool';
import { answerOrUserError } from './user-errors';
import { confinedPrelude, confineRefusal } from './workspace-confine';

const Input = z.strictObject({
  path: z.string().min(1).default('.').describe('Directory, relative to the workspace; default the workspace itself'),
  recursive: z.boolean().optional().describe('List the whole tree below path (at most 2000 entries)'),
});
export type ListFilesInput = z.infer<typeof Input>;

const MAX_ENTRIES = 2000;
/** Lines of stat output read: entries beyond them are not listed (a name with newlines takes several). */
const READ_LINES = 20 * MAX_ENTRIES;

/** `stat -c '%F|%s|%n'` lines as entries: a line that does not start one (`TYPE|SIZE|./`) continues the name before it. */
export function statEntries(out: string): Array<{ type: string; size: string; name: string }> {
  const entries: Array<{ type: string; size: string; name: string }> = [];
  for (const line of out.replace(/\n$/, '').split('\n')) {
    const m = /^([a-z ]+)\|(\d+)\|\.\/(.*)$/.exec(line);
    if (m) entries.push({ type: m[1]!, size: m[2]!, name: m[3]! });
    else if (entries.length > 0) entries[entries.length - 1]!.name += `\n${line}`;
  }
  return entries;
}

/**
 * A name as the listing shows it: quoted when it holds a newline or another control character, so
 * it reads as one entry, or a double quote, so no plain name reads as another one quoted.
 */
export const shownName = (name: string) => (/[\u0000-\u001f\u007f"]/.test(name) ? JSON.stringify(name) : name);

/** `list_files`: names (directories end in `/`) and sizes, sorted. Reads only, so replay `safe`. */
export const listFiles: ToolDefinition<ListFilesInput> = {
  name: 'list_files',
  description: 'List a workspace directory: one entry per line, directories end with "/", files show their size in bytes.',
  input: Input,
  replay: 'safe',
  mutates: false,
  contextCap: 8_000,
  run: (ctx, args) =>
    answerOrUserError(async () => {
      if (!args.recursive) {
        const entries = await ctx.sandbox.list(args.path);
        const lines = entries.map((e) => (e.type === 'dir' ? `${shownName(e.name)}/` : `${shownName(e.name)}  ${e.size}`));
        return { content: lines.length ? lines.join('\n') : '(empty directory)', isError: false };
      }
      // One exec for the whole tree (busybox find has no -printf, so stat prints type and size).
      // Sorted here, not by sort(1): a name may hold a newline, which splits its entry over two lines.
      // Confined in the same command (workspace-confine.ts): `cd` would follow `..`, `/etc` or a symlink out.
      const r = await ctx.sandbox.exec(['sh', '-c', `${confinedPrelude(args.path)}\ncd "$p" && find . -mindepth 1 -exec stat -c '%F|%s|%n' {} + | head -n ${READ_LINES}`], {
        signal: ctx.signal,
        timeoutMs: ctx.commandTimeoutMs,
      });
      const refused = confineRefusal(r, args.path);
      if (refused) return refused;
      if (r.exitCode !== 0 && !r.stdout) return { content: `error: cannot list ${args.path}: ${r.stderr.trim() || `exit ${r.exitCode}`}`, isError: true, refused: true };
      const lines = statEntries(r.stdout)
        .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
        .map((e) => (e.type === 'directory' ? `${shownName(e.name)}/` : `${shownName(e.name)}  ${e.size}`));
      const more = lines.length > MAX_ENTRIES ? `\n[... more entries not shown ...]` : '';
      return { content: (lines.slice(0, MAX_ENTRIES).join('\n') || '(empty directory)') + more, isError: false };
    }),
};
