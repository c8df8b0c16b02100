import { z } from 'zod';
import { sha256 } from './file-digest';
import type { ToolDefinition, ToolOutput } from './tool';
import { answerOrUserError } from './user-errors';

const Input = z.strictObject({
  path: z.string().min(1).describe('File path, relative to the workspace'),
  old_string: z.string().min(1).describe('Exact text to replace; must occur exactly once unless replace_all is set'),
  new_string: z.string().describe('Replacement text'),
  replace_all: z.boolean().optional().describe('Replace every occurrence'),
});
export type EditInput = z.infer<typeof Input>;

/** The digests fixed when the call was made: the file as it was, and as the edit makes it. */
interface EditPlan {
  path: string;
  before: string;
  after: string;
  replaced: number;
}

const occurrences = (text: string, s: string) => text.split(s).length - 1;
const apply = (text: string, a: EditInput) => (a.replace_all ? text.split(a.old_string).join(a.new_string) : text.replace(a.old_string, () => a.new_string));
const edited = (p: EditPlan): ToolOutput => ({
  content: `edited ${p.path}: replaced ${p.replaced} occurrence${p.replaced === 1 ? '' : 's'}`,
  isError: false,
  detail: { path: p.path, sha256: p.after },
});
const fail = (content: string): ToolOutput => ({ content: `error: ${content}`, isError: true, refused: true });

/**
 * `edit`: replaces text in a file as a compare-and-swap. The plan (made when the call is
 * committed) fixes the file's digest before and after; the edit applies only to that exact
 * content. Replay `verify`: after a crash a file already at the `after` digest is the confirmed
 * result, so the edit is never applied twice.
 */
export const edit: ToolDefinition<EditInput> = {
  name: 'edit',
  description:
    'Replace text in a workspace file. old_string must match exactly (including whitespace) and occur once, or set replace_all. ' +
    'The calls of one turn run in order: an edit applies to the file as the calls before it left it.',
  input: Input,
  replay: 'verify',
  mutates: true,
  contextCap: 2_000,
  async plan(ctx, a) {
    let text: string;
    try {
      text = (await ctx.sandbox.readFile(a.path)).toString('utf8');
    } catch (err) {
      const out = await answerOrUserError(() => Promise.reject(err));
      return { ok: false, output: out };
    }
    const n = occurrences(text, a.old_string);
    if (n === 0) return { ok: false, output: fail(`old_string was not found in ${a.path}`) };
    if (n > 1 && !a.replace_all) return { ok: false, output: fail(`old_string occurs ${n} times in ${a.path}; add context to make it unique or set replace_all`) };
    const plan: EditPlan = { path: a.path, before: sha256(text), after: sha256(apply(text, a)), replaced: a.replace_all ? n : 1 };
    return { ok: true, plan: { ...plan } };
  },
  run: (ctx, a, raw) =>
    answerOrUserError(async () => {
      const plan = raw as unknown as EditPlan;
      const text = (await ctx.sandbox.readFile(a.path)).toString('utf8');
      const now = sha256(text);
      if (now === plan.after) return edited(plan);
      if (now !== plan.before) return fail(`${a.path} changed after this edit was planned (another call wrote it); read it again and retry`);
      await ctx.sandbox.writeFile(a.path, apply(text, a));
      return edited(plan);
    }),
  async verify(ctx, a, raw) {
    const plan = raw as unknown as EditPlan;
    const have = await ctx.sandbox.readFile(a.path).then(sha256, () => null);
    return have === plan.after ? { done: true, output: edited(plan) } : { done: false };
  },
};
