import { z } from 'zod';
import { defineTask, storedValue, type TaskHandler, type TypedDecision, type TypedPhaseContext } from '../kernel';
import { runInputOf, type AgentDeps } from './agent-deps';
import { AgentRunInputSchema, type AgentRunInput, type GenerationInput } from './agent-input';
import { ENTRY, type UserEntry } from './entries';
import { GENERATE_KIND, GenerationResultSchema, turnOf } from './generation-task';
import { isCallerDriven } from './model';
import { budgetExceeded, turnBudgetUse, wholeBudgetMs } from './run-budget';

export const AGENT_KIND = 'agent';

const RootCheckpointSchema = z.object({
  turn: z.number().int().positive(),
  /** Milliseconds the commands of the finished turns' tool calls took: what `resources.runBudgetS` counts (absent: none yet). */
  usedMs: z.number().min(0).optional(),
});
type RootCheckpoint = z.infer<typeof RootCheckpointSchema>;

/** What an agent run's root commits when the model answers without tool calls. */
export const AgentResultSchema = z.object({ answer: z.string().nullable(), turns: z.number().int() });
type AgentResult = z.infer<typeof AgentResultSchema>;
type RootDecision = TypedDecision<RootCheckpoint, AgentResult>;

/** The next turn, given what is left of the run's budget for its commands (run-budget.ts). */
const generate = (input: AgentRunInput, turn: number, usedMs: number, writes?: RootDecision['writes']): RootDecision => ({
  type: 'spawn',
  join: 'allSettled',
  phase: 'generated',
  checkpoint: { turn, usedMs },
  tasks: [{ kind: GENERATE_KIND, input: { turn, budgetMs: wholeBudgetMs(input.environment) - usedMs } satisfies GenerationInput }],
  ...(writes ? { writes } : {}),
});

/**
 * The root of an agent run: readies the session's sandbox, then runs one generation task per
 * model turn until the model answers without tool calls or the turn limit is reached.
 */
export function agentRootHandler(deps: AgentDeps): TaskHandler {
  return defineTask({
    kind: AGENT_KIND,
    version: 1,
    input: AgentRunInputSchema,
    checkpoint: RootCheckpointSchema,
    result: AgentResultSchema,
    initialPhase: 'start',
    restartLimit: 10,
    maxRetries: 8,
    phases: {
      start: async (ctx) => {
        const input = ctx.value;
        const acq = await deps.sandbox.exclusive(ctx.task.sessionId, () => deps.sandbox.open(ctx, input));
        // Nothing has run yet in this run, so there is nothing to reconcile: the run fails, saying why.
        if (acq.kind === 'reconcile') return { type: 'fail', error: { code: 'sandbox_unusable', message: `the session's sandbox cannot be used: ${acq.reason}` } };
        if (isCallerDriven(input.settings.model)) return dictated(deps, ctx, input, acq.writes);
        return generate(input, 1, 0, acq.writes);
      },
      // A caller-driven run's call has settled (whatever its outcome: the result entry says it); the run ends.
      called: async (ctx) => {
        const { stop } = turnBudgetUse(await ctx.children());
        if (stop) return { type: 'fail', error: budgetExceeded((await runInputOf(deps.store, ctx.task)).environment, 1, stop) };
        return { type: 'complete', result: { answer: 'done', turns: 1 } };
      },
      generated: async (ctx) => {
        const input = await runInputOf(deps.store, ctx.task);
        const { turn } = ctx.state;
        // The turn's generation task: the newest child (children are in spawn order, not wall-clock order).
        const gen = (await ctx.children()).at(-1)!;
        if (gen.outcome !== 'ok') {
          return { type: 'fail', error: { code: gen.error?.code ?? 'generation_failed', message: `turn ${turn}: ${gen.error?.message ?? gen.outcome}` } };
        }
        const result = storedValue(GenerationResultSchema, gen.result, { what: 'result', kind: GENERATE_KIND, taskId: gen.id });
        // A call the run's budget stopped or did not start ends the run, as a plan step over it does.
        if (result.budgetStop) return { type: 'fail', error: budgetExceeded(input.environment, turn, result.budgetStop) };
        if (result.final) return { type: 'complete', result: { answer: result.content, turns: turn } };
        // A caller-driven run makes exactly its dictated call: the turn after it could only answer
        // "done" (see callerDrivenChatClient), so the run ends here, sparing every MCP call the
        // commits of a second generation task.
        if (isCallerDriven(input.settings.model)) return { type: 'complete', result: { answer: 'done', turns: turn } };
        if (turn >= input.settings.maxTurns) {
          return { type: 'fail', error: { code: 'turn_limit', message: `the model was still calling tools after ${turn} turns (limit ${input.settings.maxTurns})` } };
        }
        return generate(input, turn + 1, (ctx.state.usedMs ?? 0) + (result.commandMs ?? 0));
      },
    },
  });
}

/**
 * A caller-driven run (an MCP client, an SDK adapter) makes the one call its user message
 * dictates: the reply is a pure function of that message, so the root commits it (the model
 * entry) and spawns the call's tool task itself, in the commit that readies the sandbox. No
 * generation task: it would add five commits (its start, a step, its spawn, its wake, its end) to
 * every call for a turn that asks no model. A process killed before this commit decides the same
 * reply again; runs started before this path (root in `generated`) finish as they began.
 */
async function dictated(deps: AgentDeps, ctx: TypedPhaseContext<AgentRunInput, RootCheckpoint>, input: AgentRunInput, writes: NonNullable<RootDecision['writes']>): Promise<RootDecision> {
  const m = input.settings.model;
  const entries = await ctx.store.listEntries(ctx.task.sessionId, ctx.task.runId ? { runId: ctx.task.runId } : {});
  const user = entries.findLast((e) => e.kind === ENTRY.user);
  const messages = user ? [{ role: 'user' as const, content: (user.body as unknown as UserEntry).text }] : [];
  const reply = await deps.chatClient(m).complete({ model: m.model, messages, tools: [], stream: false }, { signal: ctx.signal, timeoutMs: m.timeoutMs });
  const turn = turnOf(deps, input, 1, reply, ctx.now(), ctx.task.runId, wholeBudgetMs(input.environment));
  const all = { ...writes, entries: [...(writes.entries ?? []), ...turn.entries] };
  if (turn.tasks.length === 0) return { type: 'complete', result: { answer: reply.content, turns: 1 }, writes: all };
  return { type: 'spawn', join: 'allSettled', phase: 'called', checkpoint: { turn: 1 }, tasks: turn.tasks, writes: all };
}
