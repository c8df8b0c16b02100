import { z } from 'zod';
import { shellQuote } from './shell-quote';
import type { ToolDefinition } from './tool';
import { answerOrUserError } from './user-errors';

const Input = z.strictObject({
  path: z.string().min(1).default('.').describe('Directory, relative to the workspace; default the workspace itself'),
  recursive: z.boolean().optional().describe('List the whole tree below path (at most 2000 entries)'),
});
export type ListFilesInput = z.infer<typeof Input>;

const MAX_ENTRIES = 2000;

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
        const lines = entries.map((e) => (e.type === 'dir' ? `${e.name}/` : `${e.name}  ${e.size}`));
        return { content: lines.length ? lines.join('\n') : '(empty directory)', isError: false };
      }
      // One exec for the whole tree (busybox find has no -printf, so stat prints type and size).
      const r = await ctx.sandbox.exec(['sh', '-c', `cd ${shellQuote(args.path)} && find . -mindepth 1 -exec stat -c '%F|%s|%n' {} + | sort -t '|' -k 3 | head -n ${MAX_ENTRIES + 1}`], {
        signal: ctx.signal,
        timeoutMs: ctx.commandTimeoutMs,
      });
      if (r.exitCode !== 0 && !r.stdout) return { content: `error: cannot list ${args.path}: ${r.stderr.trim() || `exit ${r.exitCode}`}`, isError: true, refused: true };
      const lines = r.stdout
        .split('\n')
        .filter(Boolean)
        .map((l) => {
          const [type, size, ...name] = l.split('|');
          const rel = name.join('|').replace(/^\.\//, '');
          return type === 'directory' ? `${rel}/` : `${rel}  ${size}`;
        });
      const more = lines.length > MAX_ENTRIES ? `\n[... more entries not shown ...]` : '';
      return { content: (lines.slice(0, MAX_ENTRIES).join('\n') || '(empty directory)') + more, isError: false };
    }),
};
