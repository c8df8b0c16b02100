import { shownName } from './list-files';
import { z } from 'zod';
import { sha256 } from './file-digest';
import type { ToolDefinition, ToolOutput } from './tool';
import { answerOrUserError } from './user-errors';

const Input = z.strictObject({
  path: z.string().min(1).describe('File path, relative to the workspace; missing directories are created'),
  content: z.string().describe('The whole new content of the file'),
});
export type WriteFileInput = z.infer<typeof Input>;

const done = (a: WriteFileInput, digest: string): ToolOutput => ({
  content: `wrote ${Buffer.byteLength(a.content)} bytes to ${shownName(a.path)}`,
  isError: false,
  detail: { path: a.path, sha256: digest },
});

/**
 * `write_file`: replaces a file's content. Replay `verify`: after a crash the file's digest is
 * compared with the intended content's before writing again, so a confirmed write is reused.
 */
export const writeFile: ToolDefinition<WriteFileInput> = {
  name: 'write_file',
  description: 'Create or overwrite a workspace file with the given content.',
  input: Input,
  replay: 'verify',
  mutates: true,
  contextCap: 2_000,
  plan: async (_ctx, a) => ({ ok: true, plan: { path: a.path, sha256: sha256(a.content) } }),
  run: (ctx, a) =>
    answerOrUserError(async () => {
      await ctx.sandbox.writeFile(a.path, a.content);
      return done(a, sha256(a.content));
    }),
  async verify(ctx, a) {
    const want = sha256(a.content);
    const have = await ctx.sandbox.readFile(a.path).then(sha256, () => null);
    return have === want ? { done: true, output: done(a, want) } : { done: false };
  },
};
