import { z } from 'zod';
import { BerthError } from '../host/errors';
import type { ExecResult } from '../host/sandbox';
import type { ToolDefinition } from './tool';

const Input = z.strictObject({
  command: z
    .string()
    .min(1)
    // No process argument can hold one: the engine answered `exec /bin/sh: invalid argument` as if the command had run and failed.
    .refine((c) => !c.includes('\0'), 'a shell command cannot hold a NUL byte')
    .describe('A shell command, run with sh -c in the workspace directory'),
  timeout_s: z.number().int().positive().optional().describe('Seconds before the command is killed (capped by the environment)'),
  safe: z
    .boolean()
    .optional()
    .describe('True only for a read-only command that may be run again after a crash (e.g. cat, ls, grep); default false'),
});
export type ExecInput = z.infer<typeof Input>;

/** The text the model reads: exit status first, then each stream that said something. */
export function describeExec(r: ExecResult): string {
  const status = r.timedOut
    ? `timed out after ${Math.round(r.durationMs / 1000)}s (killed)`
    : r.oomKilled
      ? `killed: out of memory (exit ${r.exitCode})`
      : r.diskExceeded
        ? `killed: disk limit exceeded (exit ${r.exitCode})`
        : `exit code ${r.exitCode}`;
  const parts = [status];
  if (r.pidsLimited) parts.push('note: a process could not be started (pids limit)');
  if (r.stdout) parts.push(`--- stdout ---\n${r.stdout.replace(/\n$/, '')}`);
  if (r.stderr) parts.push(`--- stderr ---\n${r.stderr.replace(/\n$/, '')}`);
  return parts.join('\n');
}

/**
 * `exec`: a shell command in the sandbox. Replay `never` (a command may send, delete or append),
 * unless the call marks itself `safe`, which also says it leaves the sandbox as it was.
 */
export const exec: ToolDefinition<ExecInput> = {
  name: 'exec',
  description:
    'Run a shell command (sh -c) in the sandbox workspace and get its exit code, stdout and stderr. ' +
    'Set safe=true only for read-only commands: a command that is not safe is never repeated automatically after a crash.',
  input: Input,
  replay: (a) => (a.safe ? 'safe' : 'never'),
  mutates: (a) => !a.safe,
  contextCap: 12_000,
  async run(ctx, args) {
    const timeoutMs = Math.min(ctx.commandTimeoutMs, (args.timeout_s ?? Infinity) * 1000);
    const r = await ctx.sandbox.exec(['sh', '-c', args.command], {
      timeoutMs,
      signal: ctx.signal,
      onOutput: ctx.onOutput ? (stream, chunk) => ctx.onOutput!(stream, chunk.toString('utf8')) : undefined,
    });
    // Cancelled before the sandbox got the command (the host withholds the wrapper's first line once
    // its signal aborted): nothing ran, which the call's caller records as not sent.
    if (r.notStarted) throw new BerthError('command_not_started', 'the call was cancelled before its command started; nothing ran');
    return {
      content: describeExec(r),
      isError: r.exitCode !== 0 || r.timedOut,
      detail: { exitCode: r.exitCode, timedOut: r.timedOut, oomKilled: r.oomKilled, diskExceeded: r.diskExceeded, truncated: r.truncated },
    };
  },
};
