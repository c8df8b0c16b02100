import { resolveFlag, toolSchema, type AnyTool, type ChatTool } from '../../tools';
import { z } from 'zod';
import { defineTask, type SpawnSpec, type TaskHandler, type TypedDecision, type TypedPhaseContext } from '../kernel';
import { plainJson } from '../model';
import { runInputOf, toolsOf, type AgentDeps } from './agent-deps';
import { GenerationInputSchema, type AgentRunInput, type ApprovalTimerInput, type GenerationInput, type ToolCallInput } from './agent-input';
import { TIMER_KIND } from './approval-timer';
import { TOOL_KIND } from './agent-sandbox';
import { buildContext, type Cut } from './context';
import { planContext } from './context-budget';
import { ENTRY, type InterruptionEntry, type ModelEntry } from './entries';
import type { Entry } from '../model';
import { faultPoint } from '../support/faults';
import { backoffMs, isCallerDriven, ModelCallError, type ChatRequest, type ModelReply } from './model';
import { checkToolCall } from './tool-call-check';
import { begunToolTask } from './tool-intent';
import { networkHint } from './network-hint';
import { turnBudgetUse } from './run-budget';
import { secretHint } from './run-secrets';

export const GENERATE_KIND = 'agent-generate';

const ModelReplySchema = z.object({
  content: z.string().nullable(),
  toolCalls: z.array(z.object({ id: z.string(), name: z.string(), arguments: z.string() })),
  finishReason: z.string(),
  model: z.string(),
  responseId: z.string().nullable(),
  usage: z.object({ promptTokens: z.number(), completionTokens: z.number(), totalTokens: z.number(), cachedTokens: z.number().optional() }).nullable(),
}) satisfies z.ZodType<ModelReply>;

/** What `prepare` fixed: the context position and the request options, then the attempt in progress. */
const GenerationCheckpointSchema = z.object({
  /** Entries with a sequence number up to this one make the context; later ones are not seen. */
  contextSeq: z.number().int(),
  options: z.object({ model: z.string(), stream: z.boolean(), temperature: z.number().optional(), maxTokens: z.number().optional(), tools: z.array(z.string()) }),
  attempt: z.number().int().positive(),
  /** Set by `request` on success: the answer `tools` commits. */
  reply: ModelReplySchema.optional(),
});
export type GenerationCheckpoint = z.infer<typeof GenerationCheckpointSchema>;

/** The result the root task reads: a final answer, or how many tool calls this turn made. */
export const GenerationResultSchema = z.object({
  final: z.boolean(),
  content: z.string().nullable(),
  toolCalls: z.number().int(),
  /** Milliseconds the turn's tool calls' commands took: the root adds them to the run's `resources.runBudgetS` count. */
  commandMs: z.number().min(0).optional(),
  /** The call the run's budget stopped or did not start, as the run's failure names it. */
  budgetStop: z.string().optional(),
});
export type GenerationResult = z.infer<typeof GenerationResultSchema>;

type GenerationContext = TypedPhaseContext<GenerationInput, GenerationCheckpoint>;
type GenerationDecision = TypedDecision<GenerationCheckpoint, GenerationResult>;

/**
 * One model turn. `prepare` fixes the context position and options; entering `request` records
 * the attempt (its checkpoint) before the call is made; `retry` waits out the backoff (kept in
 * task state) within the attempt budget; `tools` commits the answer, one tool task per call and
 * the wait for them in one commit; `settled` ends the turn once every tool task has.
 */
export function generationHandler(deps: AgentDeps): TaskHandler {
  return defineTask({
    kind: GENERATE_KIND,
    version: 1,
    input: GenerationInputSchema,
    checkpoint: GenerationCheckpointSchema,
    result: GenerationResultSchema,
    initialPhase: 'prepare',
    restartLimit: 10,
    phases: {
      prepare: (ctx) => prepare(deps, ctx),
      request: (ctx) => request(deps, ctx),
      retry: async (ctx) => {
        const input = await runInputOf(deps.store, ctx.task);
        const cp = ctx.state;
        if (cp.attempt >= input.settings.model.maxAttempts) {
          return { type: 'fail', error: { code: 'model_unavailable', message: `no complete model answer after ${cp.attempt} attempts (see the agent.interruption entries)` } };
        }
        return { type: 'next', phase: 'request', checkpoint: { ...cp, attempt: cp.attempt + 1 }, run: { to: 'running', reason: `retrying the model request (attempt ${cp.attempt + 1})` } };
      },
      tools: (ctx) => tools(deps, ctx),
      settled: async (ctx) => {
        const cp = ctx.state;
        const use = turnBudgetUse(await ctx.children());
        const result: GenerationResult = { final: false, content: cp.reply?.content ?? null, toolCalls: cp.reply?.toolCalls.length ?? 0, commandMs: use.commandMs, ...(use.stop ? { budgetStop: use.stop } : {}) };
        return { type: 'complete', result };
      },
    },
  });
}

/** The tool as advertised, with what its commands can reach and the names (never values) of the secrets they get. */
function withHints(t: ChatTool, input: AgentRunInput): ChatTool {
  const hint = networkHint(input.environment, t.function.name) + secretHint(input.environment, t.function.name);
  return hint ? { ...t, function: { ...t.function, description: t.function.description + hint } } : t;
}

function interruption(turn: number, attempt: number, code: string, message: string, partialText: string, overflow?: InterruptionEntry['overflow']) {
  const body: InterruptionEntry = { turn, attempt, code, message, partialText, ...(overflow ? { overflow } : {}) };
  return { kind: ENTRY.interruption, body: plainJson(body) };
}

const requestBytes = (req: Pick<ChatRequest, 'messages' | 'tools'>) => Buffer.byteLength(JSON.stringify({ messages: req.messages, tools: req.tools }));

/**
 * What refusals for length in the session's record say: the newest stated window, and the fewest
 * bytes per token the endpoint counted (with a tenth to spare), which the estimate must not exceed.
 */
function statedWindow(entries: Entry[]): { contextTokens?: number; bytesPerToken?: number } {
  let contextTokens: number | undefined;
  let bytesPerToken: number | undefined;
  for (const e of entries) {
    if (e.kind !== ENTRY.interruption) continue;
    const o = (e.body as unknown as InterruptionEntry).overflow;
    if (!o) continue;
    contextTokens = o.contextTokens;
    if (o.promptTokens) bytesPerToken = Math.min(bytesPerToken ?? Infinity, (0.9 * o.requestBytes) / o.promptTokens);
  }
  return { contextTokens, bytesPerToken };
}

/** The tools a request offers: the same for every cut the planner tries, so built once per `prepare`. */
function advertisedTools(deps: AgentDeps, input: AgentRunInput, options: GenerationCheckpoint['options']) {
  const byName = toolsOf(deps, input);
  return { byName, schemas: options.tools.flatMap((n) => (byName.has(n) ? [withHints(toolSchema(byName.get(n)!), input)] : [])) };
}

/** The request for these entries: the same function builds what is estimated and what is sent. */
function requestOf(deps: AgentDeps, input: AgentRunInput, options: GenerationCheckpoint['options'], entries: Entry[], cut?: Cut, advertised = advertisedTools(deps, input, options)): ChatRequest {
  return {
    model: options.model,
    messages: buildContext(entries, { systemPrompt: input.settings.systemPrompt, tools: advertised.byName, compaction: input.settings.compaction, cut }),
    tools: advertised.schemas,
    stream: options.stream,
    temperature: options.temperature,
    maxTokens: options.maxTokens,
  };
}

/**
 * Fixes the context position and the request options. With a known window (`model.contextTokens`)
 * the request must fit it: when it does not, the compaction that makes it fit is committed as an
 * entry with the checkpoint, and `request` builds the context from the committed entries alone. A context the rule cannot make fit fails the turn
 * (`context_too_large`, naming the sizes); the session stays usable: `berth chat` with a larger
 * window, or after a fork, continues it.
 */
async function prepare(deps: AgentDeps, ctx: GenerationContext): Promise<GenerationDecision> {
  const input = await runInputOf(deps.store, ctx.task);
  const entries = await ctx.store.listEntries(ctx.task.sessionId);
  const m = input.settings.model;
  const cp: GenerationCheckpoint = {
    contextSeq: entries.at(-1)?.seq ?? 0,
    options: { model: m.model, stream: m.stream, temperature: m.temperature, maxTokens: m.maxTokens, tools: [...toolsOf(deps, input).keys()] },
    attempt: 1,
  };
  const stated = statedWindow(entries);
  const contextTokens = m.contextTokens ?? stated.contextTokens;
  if (contextTokens === undefined) {
    // A caller-driven reply is a pure function of these entries (no model is asked, nothing is paid):
    // it goes into the same checkpoint, one commit instead of a `request` step of its own.
    if (isCallerDriven(m)) return { type: 'next', phase: 'tools', checkpoint: { ...cp, reply: await deps.chatClient(m).complete(requestOf(deps, input, cp.options, entries), { signal: ctx.signal, timeoutMs: m.timeoutMs }) } };
    return { type: 'next', phase: 'request', checkpoint: cp };
  }
  const c = input.settings.compaction;
  const advertised = advertisedTools(deps, input, cp.options);
  const plan = planContext(entries, {
    contextTokens,
    replyTokens: m.maxTokens ?? c.replyTokens,
    bytesPerToken: Math.min(c.bytesPerToken, stated.bytesPerToken ?? Infinity),
    targetShare: c.targetShare,
    turn: ctx.value.turn,
    request: (cut) => requestOf(deps, input, cp.options, entries, cut, advertised),
  });
  if (plan.kind === 'fits') return { type: 'next', phase: 'request', checkpoint: cp };
  if (plan.kind === 'too_large') {
    const message =
      `the request needs about ${plan.estimated} tokens even with every older turn left out, over the budget of ${plan.budget} ` +
      `(a window of ${plan.contextTokens} tokens less ${plan.contextTokens - plan.budget} for the answer); ` +
      'continue the session with a larger model.contextTokens (berth chat SESSION MESSAGE --context-tokens N) or fork it at an earlier turn';
    return { type: 'fail', error: { code: 'context_too_large', message } };
  }
  // A process killed here has decided the cut and committed nothing: the next one decides it again, alike.
  faultPoint('agent.compaction');
  ctx.log.info({ ...plan.entry }, 'compacting the model context');
  // `request` reads the entries up to `contextSeq` and this task's own compaction entries, which
  // commit with this checkpoint: the cut applies from this very request on.
  return { type: 'next', phase: 'request', checkpoint: cp, writes: { entries: [{ kind: ENTRY.compaction, body: plainJson(plan.entry) }] } };
}

async function request(deps: AgentDeps, ctx: GenerationContext): Promise<GenerationDecision> {
  const { turn } = ctx.value;
  const cp = ctx.state;
  const input = await runInputOf(deps.store, ctx.task);
  const m = input.settings.model;
  const retryAt = (ms: number) => ctx.now() + ms;
  if (ctx.recovered) {
    // Entering `request` recorded this attempt; finding it still here after a restart means the
    // host died with the request unanswered (or about to be sent). Nothing of it is trusted.
    const entry = interruption(turn, cp.attempt, 'host_stopped', 'the host stopped before this request was answered', '');
    // The dead host's request may have been worked on (a server that never answered still ran it):
    // counted as a request, with no tokens known. Durable with the interruption's commit.
    if (!isCallerDriven(m)) await ctx.store.recordCost({ runId: ctx.task.runId!, at: ctx.now(), key: cp.options.model, meters: { 'model.requests': 1 } }, { sync: 'with-next-commit' });
    return { type: 'sleep', until: retryAt(0), phase: 'retry', writes: { entries: [entry] } };
  }
  const entries = (await ctx.store.listEntries(ctx.task.sessionId)).filter((e) => e.seq <= cp.contextSeq || (e.kind === ENTRY.compaction && e.taskId === ctx.task.id));
  // A process killed here has committed its cut and sent nothing: the next one sends the same request.
  if (entries.at(-1)?.kind === ENTRY.compaction && entries.at(-1)!.taskId === ctx.task.id) faultPoint('agent.compaction.committed');
  const req = requestOf(deps, input, cp.options, entries);
  const runId = ctx.task.runId!;
  try {
    const reply = await deps.chatClient(m).complete(req, {
      signal: ctx.signal,
      timeoutMs: m.timeoutMs,
      onDelta: deps.onLive ? (text) => deps.onLive!({ type: 'model-delta', runId, turn, text }) : undefined,
    });
    // Counted as soon as the answer is in, before it commits: a host that dies now asks again, and
    // both answers were paid for. By the model the endpoint says answered.
    const model = reply.model || cp.options.model;
    const u = reply.usage;
    // A caller-driven turn asked no model (the MCP client dictated the call): nothing was paid, and
    // its sample would be two more store commits on every MCP call.
    if (!isCallerDriven(m)) await ctx.store.recordCost({ runId, at: ctx.now(), key: model, meters: { 'model.requests': 1, ...(u ? { 'tokens.prompt': u.promptTokens, 'tokens.completion': u.completionTokens, 'tokens.cached': u.cachedTokens ?? 0 } : {}) } });
    return { type: 'next', phase: 'tools', checkpoint: { ...cp, reply } };
  } catch (err) {
    if (!(err instanceof ModelCallError) || err.failure === 'model_aborted') throw err;
    if (err.failure === 'model_context_overflow' && err.window) {
      // The endpoint said how large its window is: recorded, the next `prepare` compacts to it.
      const overflow = { ...err.window, requestBytes: requestBytes(req) };
      const entry = interruption(turn, cp.attempt, err.code, err.message, err.partialText, overflow);
      const earlier = (await ctx.store.listEntries(ctx.task.sessionId)).filter((e) => e.taskId === ctx.task.id && e.kind === ENTRY.interruption && (e.body as unknown as InterruptionEntry).overflow).length;
      if (earlier + 1 >= m.maxAttempts) {
        const message = `the endpoint refused the request as longer than its window ${earlier + 1} times (window ${err.window.contextTokens} tokens, prompt ${err.window.promptTokens ?? '?'}); continue the session with a smaller model.contextTokens or fork it at an earlier turn`;
        return { type: 'fail', error: { code: 'context_too_large', message }, writes: { entries: [entry] } };
      }
      return { type: 'next', phase: 'prepare', checkpoint: cp, writes: { entries: [entry] } };
    }
    const entry = interruption(turn, cp.attempt, err.code, err.message, err.partialText);
    if (!err.retryable) return { type: 'fail', error: { code: err.code, message: err.message }, writes: { entries: [entry] } };
    if (cp.attempt >= m.maxAttempts) {
      return { type: 'fail', error: { code: 'model_unavailable', message: `no complete model answer after ${cp.attempt} attempts; the last: ${err.code}: ${err.message}` }, writes: { entries: [entry] } };
    }
    const wait = backoffMs(cp.attempt, { baseMs: m.backoffMs, maxMs: m.maxBackoffMs, retryAfterMs: err.retryAfterMs });
    ctx.log.warn({ code: err.code, attempt: cp.attempt, waitMs: wait }, 'model request failed; retrying');
    const reason = `model request failed (${err.code}); retry ${cp.attempt + 1} of ${m.maxAttempts} in ${Math.round(wait / 100) / 10}s`;
    return { type: 'sleep', until: retryAt(wait), phase: 'retry', writes: { entries: [entry] }, run: { to: 'retry_wait', reason } };
  }
}

async function tools(deps: AgentDeps, ctx: GenerationContext): Promise<GenerationDecision> {
  const { turn } = ctx.value;
  const cp = ctx.state;
  const input = await runInputOf(deps.store, ctx.task);
  const reply = cp.reply!;
  const t = turnOf(deps, input, turn, reply, ctx.now(), ctx.task.runId, ctx.value.budgetMs);
  if (t.tasks.length === 0) {
    const result: GenerationResult = { final: true, content: reply.content, toolCalls: 0 };
    return { type: 'complete', result, writes: { entries: t.entries } };
  }
  return { type: 'spawn', join: 'allSettled', phase: 'settled', tasks: t.tasks, writes: { entries: t.entries } };
}

/**
 * What a turn's answer commits: its model entry, and one tool task per call it makes (with an
 * approval timer for each call that waits for an operator). No tasks: the answer is final. A call
 * that needs no approval and no plan commits its intent here too (see {@link begunToolTask}).
 * `budgetMs`: what is left of the run's `resources.runBudgetS` for the turn's commands.
 */
export function turnOf(deps: Pick<AgentDeps, 'tools'>, input: AgentRunInput, turn: number, reply: ModelReply, now: number, runId: string | null, budgetMs?: number): { entries: Array<{ kind: string; body: ReturnType<typeof plainJson> }>; tasks: SpawnSpec[] } {
  const calls = reply.toolCalls.map((c, i) => ({ ...c, id: c.id || `call_${turn}_${i}` }));
  const body: ModelEntry = { turn, content: reply.content, toolCalls: calls, finishReason: reply.finishReason, model: reply.model, usage: reply.usage };
  const entries = [{ kind: ENTRY.model, body: plainJson(body) }];
  if (calls.length === 0) return { entries, tasks: [] };
  const available = toolsOf(deps, input);
  const tasks: SpawnSpec[] = [];
  const timers: SpawnSpec[] = [];
  calls.forEach((c, index) => {
    const checked = checkToolCall(available, c.name, c.arguments);
    const expiresAt = checked.ok && needsApproval(input, checked.tool, checked.args) ? now + input.settings.approvalTtlMs : null;
    const tc: ToolCallInput = { toolCallId: c.id, name: c.name, arguments: c.arguments, turn, index, approvalExpiresAt: expiresAt, ...(budgetMs === undefined ? {} : { budgetMs }) };
    tasks.push(checked.ok && expiresAt === null && !checked.tool.plan ? begunToolTask(runId, tc, checked.tool, checked.args) : { kind: TOOL_KIND, input: tc });
    if (expiresAt !== null) timers.push({ kind: TIMER_KIND, input: { toolCallId: c.id, expiresAt } satisfies ApprovalTimerInput });
  });
  return { entries, tasks: [...tasks, ...timers] };
}

function needsApproval(input: AgentRunInput, tool: AnyTool, args: unknown): boolean {
  return input.settings.requireApproval.includes(tool.name) || Boolean(resolveFlag(tool.requiresApproval ?? false, args));
}
