import { checkEgressPolicy, checkSupported, fingerprint, networkRunRecords, type Environment } from '../../environment';
import { scanHostDir } from '../sandbox';
import { BerthError } from '../errors';
import { ownerGone, storedValue, submit, type HandlerRegistry, type Kernel, type Submitted } from '../kernel';
import { OPEN_RUN_STATES, plainJson } from '../model';
import type { Store } from '../store';
import { newId } from '../support';
import { KERNEL } from '../version';
import { AgentRunInputSchema, AgentSettingsSchema, type AgentRunInput, type AgentSettingsInput } from './agent-input';
import { ENTRY, type UserEntry } from './entries';
import { AGENT_KIND } from './root-task';
import { checkAgentSecrets } from './run-secrets';
import { sessionNotFound } from '../store/missing-run';
import { wrongSessionKind } from './model/caller-driven';

/** `hostId`: this machine's host id, so that an owner process of this machine that is gone counts as gone at once. */
type Deps = { store: Store; kernel: Kernel; registry: HandlerRegistry; toolNames: readonly string[]; hostId?: string };

export interface StartAgentRun {
  message: string;
  settings: AgentSettingsInput;
  environment: Environment & { image: { digest: string } };
  workspaceDir?: string | null;
  /** The same request id always yields the same submission and run. Default: a new one. */
  requestId?: string;
  /** Where the environment was read from, named in errors about it. Default: `environment`. */
  environmentFile?: string;
  /** The caller drives the run itself at once (see SubmitInput.start): the root starts in the submit commit. */
  start?: boolean;
}

function checkTools(names: readonly string[], settings: AgentRunInput['settings']): void {
  for (const n of [...(settings.tools ?? []), ...settings.requireApproval]) {
    if (!names.includes(n)) throw new BerthError('tool_unknown', `no tool named "${n}" (tools: ${names.join(', ')})`, { details: { tool: n } });
  }
}

async function submitRun(deps: Deps, input: AgentRunInput, requestId: string, sessionId?: string, forkedFromRunId?: string, start?: boolean): Promise<Submitted> {
  const user: UserEntry = { text: input.message };
  // Checked per run, not per session: a session continued on another machine meets other host addresses.
  checkSupported(input.environment);
  const accepted = await checkEgressPolicy(input.environment);
  // A workspace symlink leaving the directory is refused now, before a run exists or a sandbox is leased.
  if (input.workspaceDir) await scanHostDir(input.workspaceDir);
  const network = networkRunRecords(input.environment, accepted).map((r) => ({ kind: r.kind, body: plainJson(r.body) }));
  const parsed = AgentRunInputSchema.parse(input);
  const submitted = await submit(deps, {
    requestId,
    sessionId,
    runKind: 'agent',
    // Stored as its kind's schema produces it: the agent task parses the same shape before every phase.
    root: { kind: AGENT_KIND, input: plainJson(parsed) },
    input: { message: input.message },
    entries: [{ kind: ENTRY.user, body: plainJson(user) }, ...network],
    versions: { kernel: `${KERNEL.name}@${KERNEL.version}`, envFingerprint: input.envFingerprint, imageDigest: input.environment.image.digest },
    sessionMeta: { agent: true, task: input.message.slice(0, 200) },
    ...(forkedFromRunId ? { forkedFromRunId } : {}),
    ...(start ? { start } : {}),
  });
  // The session's next message continues from this root: it need not parse what was just parsed.
  if (submitted.created && submitted.run.rootTaskId) rememberInput(submitted.run.rootTaskId, parsed);
  return submitted;
}

/**
 * A new agent session and its first run: the submission, the user entry and the root task in one
 * commit. The API key is not part of anything submitted: only the name of its variable; nor are
 * secret values: a run whose manifest gives a secret to a name that is no tool, or whose secrets
 * cannot be read now, is refused (see {@link checkAgentSecrets}).
 */
export async function submitAgentRun(deps: Deps, s: StartAgentRun): Promise<Submitted> {
  const settings = parsedSettings(s.settings);
  checkTools(deps.toolNames, settings);
  await checkAgentSecrets(s.environment, deps.toolNames, s.environmentFile ?? 'environment');
  const input: AgentRunInput = { settings, environment: s.environment, envFingerprint: fingerprint(s.environment), workspaceDir: s.workspaceDir ?? null, message: s.message };
  return submitRun(deps, input, s.requestId ?? newId('req'), undefined, undefined, s.start);
}

/**
 * The parsed input of the roots the newest runs of sessions started from. A task's input never
 * changes once committed and ids are never reused, so a session continued run after run (an MCP
 * client's every call, `berth chat`) parses its whole environment once, not at each message (the
 * largest parse in a profile of `berth mcp` serving calls: bench/mcp-profile.ts).
 */
const parsedInputs = new Map<string, AgentRunInput>();
function lastInput(root: { id: string; input: unknown }): AgentRunInput {
  const cached = parsedInputs.get(root.id);
  if (cached) return cached;
  return rememberInput(root.id, storedValue(AgentRunInputSchema, root.input, { what: 'input', kind: AGENT_KIND, taskId: root.id }));
}
function rememberInput(rootId: string, parsed: AgentRunInput): AgentRunInput {
  if (parsedInputs.size >= 64) parsedInputs.delete(parsedInputs.keys().next().value!);
  parsedInputs.set(rootId, parsed);
  return parsed;
}

export interface ContinueSession {
  sessionId: string;
  message: string;
  requestId?: string;
  /** Settings to change for this run; the rest (and the environment) carry over from the session's last run. */
  settings?: Partial<AgentSettingsInput>;
  /** The caller drives the run itself at once (see SubmitInput.start): the root starts in the submit commit. */
  start?: boolean;
}

/**
 * Another run in an existing session (`berth chat`): the model sees the whole session's entries.
 * A repeated request id returns the original run; a session with a run still going is refused.
 */
export async function continueSession(deps: Deps, c: ContinueSession): Promise<Submitted> {
  const requestId = c.requestId ?? newId('req');
  const existing = await deps.store.findSubmission(requestId);
  if (existing) return { submission: existing, run: (await deps.store.getRun(existing.runId))!, created: false };
  // The newest run and the open ones only: a session's runs grow with every message (every MCP call).
  const [newest] = await deps.store.listRuns({ sessionId: c.sessionId, kind: 'agent', newest: 1 });
  // A forked session has no run of its own before its first message: it continues with the settings of the turn it was forked at.
  const forkedFrom = newest ? undefined : ((await deps.store.getSession(c.sessionId))?.meta as { forkedFrom?: { runId: string } } | null)?.forkedFrom;
  const last = newest ?? (forkedFrom ? await deps.store.getRun(forkedFrom.runId) : undefined);
  if (!last) throw await sessionNotFound(deps.store, c.sessionId);
  const root = (await deps.store.getTask(last.rootTaskId!))!;
  const prev = lastInput(root);
  const wrongKind = wrongSessionKind(c.sessionId, prev.settings.model, c.message);
  if (wrongKind) throw wrongKind;
  const [busy] = await deps.store.listRuns({ sessionId: c.sessionId, kind: 'agent', states: OPEN_RUN_STATES });
  if (busy) {
    // A run nobody drives any more (its host died or stopped) will never finish by waiting: say how to continue it.
    const owner = busy.state === 'needs_reconciliation' ? 'n/a' : ((await deps.store.getSessionOwner(c.sessionId)) ?? null);
    if (owner !== 'n/a' && (owner === null || ownerGone(owner, await deps.store.databaseNow(), deps.hostId ?? ''))) {
      const by = owner ? `its host ${owner.holder}${owner.pid ? ` (pid ${owner.pid})` : ''} ${owner.stoppedAt !== null ? 'stopped' : 'is gone'}` : 'no host drives it';
      throw new BerthError('session_needs_resume', `run ${busy.id} of session ${c.sessionId} is ${busy.state} and ${by}: continue it with berth resume ${busy.id}, then send your message`, { ids: { sessionId: c.sessionId, runId: busy.id } });
    }
    const what = busy.state === 'needs_reconciliation' ? `decide it first (berth show ${busy.id}; berth reconcile ${busy.id} --fail)` : 'let it finish, approve or deny its calls, or cancel it';
    throw new BerthError('session_busy', `run ${busy.id} of session ${c.sessionId} is ${busy.state}; ${what}`, { ids: { sessionId: c.sessionId, runId: busy.id } });
  }
  const settings = AgentSettingsSchema.parse({ ...prev.settings, ...c.settings, model: { ...prev.settings.model, ...c.settings?.model } });
  checkTools(deps.toolNames, settings);
  await checkAgentSecrets(prev.environment, deps.toolNames, `the environment of session ${c.sessionId}`);
  // A forked session's first run is the fork: its row names the run the session was forked from.
  return submitRun(deps, { ...prev, settings, workspaceDir: null, message: c.message }, requestId, c.sessionId, forkedFrom?.runId, c.start);
}

/** The command-line flag each setting comes from, to name in an error. */
const FLAG_OF: Record<string, string> = { 'model.baseUrl': '--base-url', 'model.model': '--model', 'model.apiKeyEnv': '--api-key-env', 'model.contextTokens': '--context-tokens', maxTurns: '--max-turns', approvalTtlMs: '--approval-ttl', requireApproval: '--require-approval' };

/**
 * The settings, or `invalid_settings` naming each bad field (and its flag) with what was expected.
 * The value found is not repeated: a base URL refused for carrying credentials would print them.
 * Before, a bad --base-url ended as 'internal error' and zod's JSON.
 */
function parsedSettings(input: unknown): ReturnType<typeof AgentSettingsSchema.parse> {
  const r = AgentSettingsSchema.safeParse(input);
  if (r.success) return r.data;
  const lines = r.error.issues.map((i) => {
    const path = i.path.map(String).join('.');
    return `  ${path || '(settings)'}${FLAG_OF[path] ? ` (${FLAG_OF[path]})` : ''}: ${i.message}`;
  });
  throw new BerthError('invalid_settings', `invalid agent settings (${lines.length} problem${lines.length === 1 ? '' : 's'}):\n${lines.join('\n')}`, { details: { fields: r.error.issues.map((i) => i.path.map(String).join('.')) } });
}
