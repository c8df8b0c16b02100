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

/** `search`: grep over the workspace, `path:line:text` per match. Reads only, so replay `safe`. */
export const search: ToolDefinition<SearchInput> = {
  name: 'search',
  description: 'Search workspace files for a pattern (grep -rn). Returns "path:line:text" per matching line, at most 500 lines.',
  input: Input,
  replay: 'safe',
  mutates: false,
  contextCap: 12_000,
  async run(ctx, args) {
    const flags = ['-nHI', args.fixed ? '-F' : '', args.ignore_case ? '-i' : ''].filter(Boolean).join(' ');
    // Not `grep -r`: busybox's follows a symlink to a file anywhere in the tree (`ln -s /etc/shadow x`
    // searched /etc/shadow). find -H follows only the path argument, which the prelude confined.
    const cmd = `${confinedPrelude(args.path)}\nfind -H "$p" -type f -exec grep ${flags} -e ${shellQuote(args.pattern)} {} + | head -n ${MAX_LINES + 1}`;
    const r = await ctx.sandbox.exec(['sh', '-c', cmd], { signal: ctx.signal, timeoutMs: ctx.commandTimeoutMs });
    const refused = confineRefusal(r, args.path);
    if (refused) return refused;
    const lines = r.stdout.split('\n').filter(Boolean).map((l) => l.replace(/^\.\//, ''));
    if (lines.length === 0) {
      // grep exits 1 for "no match" and 2 for an error; only the error is the call's fault.
      const err = r.stderr.trim();
      return err ? { content: `error: ${err}`, isError: true, refused: true } : { content: 'no matches', isError: false };
    }
    const more = lines.length > MAX_LINES ? '\n[... more matches not shown ...]' : '';
    return { content: lines.slice(0, MAX_LINES).join('\n') + more, isError: false, detail: { matches: Math.min(lines.length, MAX_LINES) } };
  },
};
