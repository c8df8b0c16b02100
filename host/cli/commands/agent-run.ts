import { resolve } from 'node:path';
import { stat } from 'node:fs/promises';
import { checkSupported, loadEnvironment, requireLocked } from '../../../environment';
import { continueSession, readApiKey, submitAgentRun, wrongSessionKind, type AgentSettingsInput } from '../../agent';
import { BerthError } from '../../errors';
import type { CliContext } from '../context';
import { emit } from '../output';
import { finishAgentRun, followRun, startAgentHost } from './agent-host';
import { detachedAnswer } from './detached';

export { finishAgentRun } from './agent-host';
import { checkImageOnEngine } from './preflight';
import { takeRun } from '../../api/drive';
import { submitAgent } from '../../api/agents';

/** The agent flags of `berth agent` and `berth chat`, as parsed. */
export interface AgentFlags {
  env?: string;
  workspace?: string;
  model?: string;
  'base-url'?: string;
  'api-key-env'?: string;
  'require-approval'?: string;
  'approval-ttl'?: string;
  'max-turns'?: string;
  /** The model's context window in tokens: requests are compacted to fit it. */
  'context-tokens'?: string;
  'request-id'?: string;
  /** Submit for a `berth worker` and return at once. */
  detach?: boolean;
}

const positiveInt = (v: string | undefined, flag: string) => {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0) throw new BerthError('usage', `--${flag} expects a positive whole number, got "${v}"`);
  return n;
};

/** Settings given on the command line; `defaults` fills the model when starting a session. */
function settingsFrom(flags: AgentFlags, defaults: boolean): Partial<AgentSettingsInput> {
  const model: Partial<AgentSettingsInput['model']> = {};
  const name = flags.model ?? (defaults ? (process.env.BERTH_MODEL ?? 'gpt-4o-mini') : undefined);
  const baseUrl = flags['base-url'] ?? (defaults ? (process.env.BERTH_BASE_URL ?? 'https://api.openai.com/v1') : undefined);
  if (name) model.model = name;
  if (baseUrl) model.baseUrl = baseUrl;
  if (flags['api-key-env']) model.apiKeyEnv = flags['api-key-env'];
  const window = positiveInt(flags['context-tokens'], 'context-tokens');
  if (window) model.contextTokens = window;
  const ttl = positiveInt(flags['approval-ttl'], 'approval-ttl');
  const turns = positiveInt(flags['max-turns'], 'max-turns');
  return {
    ...(Object.keys(model).length ? { model: model as AgentSettingsInput['model'] } : {}),
    ...(flags['require-approval'] ? { requireApproval: flags['require-approval'].split(',').map((s) => s.trim()).filter(Boolean) } : {}),
    ...(ttl ? { approvalTtlMs: ttl * 1000 } : {}),
    ...(turns ? { maxTurns: turns } : {}),
  };
}

/**
 * A submission the host refuses (unknown tool, a secret given to no tool, a secret that cannot be
 * read) stops the started kernel before the error is reported, so the command ends.
 */
async function stopOnError<T>(host: Awaited<ReturnType<typeof startAgentHost>>, f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (err) {
    await host.rt.kernel.stop().catch(() => {});
    throw err;
  }
}

/** `berth agent "TASK" --env FILE [--workspace DIR] [--model M --base-url URL --api-key-env NAME]`. */
export async function agentRun(ctx: CliContext, message: string, flags: AgentFlags): Promise<number> {
  if (!flags.env) throw new BerthError('usage', 'berth agent needs --env FILE (the environment manifest of the sandbox)');
  const environment = await loadEnvironment(resolve(flags.env));
  checkSupported(environment);
  requireLocked(environment);
  const workspaceDir = flags.workspace ? resolve(flags.workspace) : null;
  if (workspaceDir && !(await stat(workspaceDir).catch(() => null))?.isDirectory()) throw new BerthError('usage', `--workspace ${flags.workspace} is not a directory`);
  const settings = { ...settingsFrom(flags, true) } as AgentSettingsInput;
  // Fail before anything is submitted: the key is read again, from the same variable, per request.
  readApiKey({ apiKeyEnv: settings.model.apiKeyEnv ?? 'OPENAI_API_KEY' });
  await checkImageOnEngine(ctx.docker, environment, resolve(flags.env));
  if (flags.detach) {
    const { run, created } = await submitAgent(ctx, { message, settings, environment, workspaceDir, requestId: flags['request-id'], environmentFile: flags.env });
    emit(ctx.json, detachedAnswer(run, created), () => `${created ? 'submitted' : 'already submitted as'} run ${run.id} in session ${run.sessionId}; a berth worker on ${ctx.store.location} drives it`);
    return 0;
  }
  const host = await startAgentHost(ctx);
  const { run, created } = await stopOnError(host, () =>
    submitAgentRun({ ...host.rt, toolNames: [...host.rt.agent.tools.keys()] }, { message, settings, environment, workspaceDir, requestId: flags['request-id'], environmentFile: flags.env }),
  );
  if (!created) await takeRun(ctx, host.rt, run);
  if (!ctx.json) process.stderr.write(`${created ? 'started' : 'already submitted as'} run ${run.id} in session ${run.sessionId} (model ${settings.model.model} at ${settings.model.baseUrl})\n`);
  return finishAgentRun(ctx, await followRun(ctx, host, run));
}

/** `berth chat SESSION "MESSAGE"`: another run in the session; the same --request-id twice is one submission. */
export async function agentChat(ctx: CliContext, sessionId: string, message: string, flags: AgentFlags): Promise<number> {
  const overrides = settingsFrom(flags, false);
  const [last] = await ctx.store.listRuns({ sessionId, kind: 'agent', newest: 1 });
  const previous = last?.rootTaskId ? ((await ctx.store.getTask(last.rootTaskId))?.input as unknown as { settings: { model: { apiKeyEnv: string; baseUrl: string } } } | undefined) : undefined;
  // A session an MCP client drives has no model (nor key) to chat with: say what it is first.
  const wrongKind = previous ? wrongSessionKind(sessionId, previous.settings.model, message) : null;
  if (wrongKind) throw wrongKind;
  // Fail before anything is submitted when the key's variable is not set in this shell.
  if (previous) readApiKey({ apiKeyEnv: overrides.model?.apiKeyEnv ?? previous.settings.model.apiKeyEnv });
  const host = await startAgentHost(ctx);
  const { run, created } = await stopOnError(host, () =>
    continueSession({ ...host.rt, toolNames: [...host.rt.agent.tools.keys()], hostId: ctx.hostId }, { sessionId, message, requestId: flags['request-id'], settings: overrides }),
  );
  if (!created) await takeRun(ctx, host.rt, run);
  if (!ctx.json) process.stderr.write(`${created ? 'started' : 'already submitted as'} run ${run.id} in session ${sessionId}\n`);
  return finishAgentRun(ctx, await followRun(ctx, host, run));
}
