import { z } from 'zod';
import type { ToolDefinition } from './tool';
import { answerOrUserError } from './user-errors';

const Input = z.strictObject({
  path: z.string().min(1).describe('File path, relative to the workspace'),
  offset: z.number().int().min(1).optional().describe('First line to return (1-based)'),
  limit: z.number().int().positive().optional().describe('Most lines to return'),
});
export type ReadFileInput = z.infer<typeof Input>;

const MAX_BYTES = 4 << 20;

/** `read_file`: one workspace file's text, optionally a line range. Reads only, so replay `safe`. */
export const readFile: ToolDefinition<ReadFileInput> = {
  name: 'read_file',
  description: 'Read a text file of the workspace. Use offset/limit for a range of lines of a long file.',
  input: Input,
  replay: 'safe',
  mutates: false,
  contextCap: 24_000,
  run: (ctx, args) =>
    answerOrUserError(async () => {
      const text = (await ctx.sandbox.readFile(args.path, { maxBytes: MAX_BYTES })).toString('utf8');
      if (args.offset === undefined && args.limit === undefined) return { content: text, isError: false };
      const lines = text.split('\n');
      const from = (args.offset ?? 1) - 1;
      const slice = lines.slice(from, args.limit === undefined ? undefined : from + args.limit);
      return { content: slice.join('\n'), isError: false, detail: { lines: lines.length, from: from + 1, to: from + slice.length } };
    }),
};
