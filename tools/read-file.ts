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
/** Where git looks for a NUL to call a file binary. */
const SNIFF_BYTES = 8_000;

/** Git's test: a NUL byte near the start (text in any 8-bit encoding has none; UTF-16 and binaries do). */
export function looksBinary(bytes: Buffer): boolean {
  return bytes.subarray(0, SNIFF_BYTES).includes(0);
}

/** `read_file`: one workspace file's text, optionally a line range. Reads only, so replay `safe`. */
export const readFile: ToolDefinition<ReadFileInput> = {
  name: 'read_file',
  description: 'Read a text file of the workspace (a binary file is refused, naming its size). Use offset/limit for a range of lines of a long file.',
  input: Input,
  replay: 'safe',
  mutates: false,
  contextCap: 24_000,
  run: (ctx, args) =>
    answerOrUserError(async () => {
      const bytes = await ctx.sandbox.readFile(args.path, { maxBytes: MAX_BYTES });
      // Decoded, a binary file is megabytes of replacement characters in the model's context and the record.
      if (looksBinary(bytes)) return { content: `error: ${args.path} is a binary file (${bytes.length} bytes); read_file shows text. Look into it with exec (od -c, head -c, file).`, isError: true, refused: true };
      const text = bytes.toString('utf8');
      if (args.offset === undefined && args.limit === undefined) return { content: text, isError: false };
      const lines = text.split('\n');
      const from = (args.offset ?? 1) - 1;
      const slice = lines.slice(from, args.limit === undefined ? undefined : from + args.limit);
      return { content: slice.join('\n'), isError: false, detail: { lines: lines.length, from: from + 1, to: from + slice.length } };
    }),
};
