/**
 * The OpenAI Agents SDK (`@openai/agents`) over a Berth session: `BerthShell` (the SDK's `Shell`),
 * `BerthEditor` (its `Editor`, for `applyPatchTool`) and `berthFunctionTools` (the built-in tools
 * as function tools, for models without hosted shell or apply_patch). Every command, read and
 * write is one durable Berth tool call of the session (see host/mcp/README.md), keyed by the
 * model's call id where the SDK gives one, so a retried call never runs twice.
 */
import { applyDiff, tool, type ApplyPatchResult, type Editor, type Shell, type ShellAction, type ShellResult } from '@openai/agents-core';
import { builtinTools, toolSchema } from '../../tools';
import type { CallOutcome, McpSessions } from '../mcp/mcp-session';

export type BerthAgentsSession = Pick<McpSessions, 'call'>;

/** The text an SDK tool result carries: an uncertain call says so first, so the model checks before repeating it. */
export function outcomeText(o: CallOutcome): string {
  return o.status === 'uncertain' ? `[uncertain: this call may or may not have taken effect; it was not repeated]\n${o.content}` : o.content;
}

/** `exec`'s text back into the SDK's streams: `exit code N`, then `--- stdout ---` and `--- stderr ---` sections. */
function execOutput(o: CallOutcome): ShellResult['output'][number] {
  const detail = (o.detail ?? {}) as { exitCode?: number; timedOut?: boolean };
  const section = (name: string) => new RegExp(`--- ${name} ---\\n([\\s\\S]*?)(?=\\n--- (?:stdout|stderr) ---\\n|$)`).exec(o.content)?.[1] ?? '';
  const stdout = o.status === 'ok' ? section('stdout') : outcomeText(o);
  return { stdout, stderr: section('stderr'), outcome: detail.timedOut ? { type: 'timeout' } : { type: 'exit', exitCode: detail.exitCode ?? (o.isError ? 1 : 0) } };
}

/** The SDK's `Shell`: each command of an action is one durable `exec` call (replay `never`: a command is not repeated after a crash). */
export class BerthShell implements Shell {
  constructor(private readonly session: BerthAgentsSession, private readonly o: { sessionId?: string } = {}) {}

  async run(action: ShellAction): Promise<ShellResult> {
    const output: ShellResult['output'] = [];
    for (const command of action.commands) {
      const timeout_s = action.timeoutMs ? Math.max(1, Math.ceil(action.timeoutMs / 1000)) : undefined;
      output.push(execOutput(await this.session.call('exec', { command, ...(timeout_s ? { timeout_s } : {}) }, { sessionId: this.o.sessionId })));
    }
    return { output, ...(action.maxOutputLength ? { maxOutputLength: action.maxOutputLength } : {}) };
  }
}

const failed = (o: CallOutcome): ApplyPatchResult => ({ status: 'failed', output: outcomeText(o) });

/**
 * The SDK's `Editor`: V4A diffs applied on the host (the SDK's `applyDiff`) to the file as read
 * through the session, and written back as a compare-and-swap `edit` of the whole file (so a file
 * changed meanwhile is refused, and a write that may have happened is verified, never repeated).
 */
export class BerthEditor implements Editor {
  constructor(private readonly session: BerthAgentsSession, private readonly o: { sessionId?: string } = {}) {}

  private call(tool: string, args: Record<string, unknown>) {
    return this.session.call(tool, args, { sessionId: this.o.sessionId });
  }

  async createFile(op: Parameters<Editor['createFile']>[0]): Promise<ApplyPatchResult> {
    const w = await this.call('write_file', { path: op.path, content: applyDiff('', op.diff, 'create') });
    return w.isError ? failed(w) : { status: 'completed', output: `created ${op.path}` };
  }

  async updateFile(op: Parameters<Editor['updateFile']>[0]): Promise<ApplyPatchResult> {
    const r = await this.call('read_file', { path: op.path });
    if (r.isError) return failed(r);
    let next: string;
    try {
      next = applyDiff(r.content, op.diff);
    } catch (err) {
      return { status: 'failed', output: `the diff does not apply to ${op.path}: ${(err as Error).message}` };
    }
    if (next === r.content) return { status: 'completed', output: `${op.path} unchanged` };
    // An empty file has no text to swap: it is written whole.
    const e = r.content === '' ? await this.call('write_file', { path: op.path, content: next }) : await this.call('edit', { path: op.path, old_string: r.content, new_string: next });
    return e.isError ? failed(e) : { status: 'completed', output: `updated ${op.path}` };
  }

  async deleteFile(op: Parameters<Editor['deleteFile']>[0]): Promise<ApplyPatchResult> {
    const quoted = `'${op.path.replace(/'/g, `'\\''`)}'`;
    const x = await this.call('exec', { command: `rm -f -- ${quoted}` });
    return x.isError ? failed(x) : { status: 'completed', output: `deleted ${op.path}` };
  }
}

/**
 * The built-in tools as SDK function tools (JSON Schema from the same zod schemas, non-strict,
 * since optional arguments stay optional; unknown arguments are refused by the tool's zod schema
 * when the call is checked). The model's call id is the Berth call id.
 */
export function berthFunctionTools(session: BerthAgentsSession, o: { sessionId?: string } = {}) {
  return builtinTools.map((t) => {
    const schema = toolSchema(t).function.parameters;
    return tool({
      name: t.name,
      description: t.description,
      parameters: { type: 'object' as const, properties: (schema.properties ?? {}) as Record<string, never>, required: (schema.required ?? []) as string[], additionalProperties: true as const },
      strict: false,
      async execute(args, _ctx, details) {
        const callId = details?.toolCall?.callId;
        return outcomeText(await session.call(t.name, args as Record<string, unknown>, { sessionId: o.sessionId, ...(callId ? { callId } : {}) }));
      },
    });
  });
}
