import { z } from 'zod';
import { defineTask, storedValue, type TaskHandler, type TypedDecision } from '../kernel';
import { runInputOf, type AgentDeps } from './agent-deps';
import { AgentRunInputSchema, type GenerationInput } from './agent-input';
import { GENERATE_KIND, GenerationResultSchema } from './generation-task';
import { isCallerDriven } from './model';

export const AGENT_KIND = 'agent';

const RootCheckpointSchema = z.object({ turn: z.number().int().positive() });
type RootCheckpoint = z.infer<typeof RootCheckpointSchema>;

/** What an agent run's root commits when the model answers without tool calls. */
export const AgentResultSchema = z.object({ answer: z.string().nullable(), turns: z.number().int() });
type AgentResult = z.infer<typeof AgentResultSchema>;
type RootDecision = TypedDecision<RootCheckpoint, AgentResult>;

const generate = (turn: number, writes?: RootDecision['writes']): RootDecision => ({
  type: 'spawn',
  join: 'allSettled',
  phase: 'generated',
  checkpoint: { turn },
  tasks: [{ kind: GENERATE_KIND, input: { turn } satisfies GenerationInput }],
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
        return generate(1, acq.writes);
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
        if (result.final) return { type: 'complete', result: { answer: result.content, turns: turn } };
        // A caller-driven run makes exactly its dictated call: the turn after it could only answer
        // "done" (see callerDrivenChatClient), so the run ends here, sparing every MCP call the
        // commits of a second generation task.
        if (isCallerDriven(input.settings.model)) return { type: 'complete', result: { answer: 'done', turns: turn } };
        if (turn >= input.settings.maxTurns) {
          return { type: 'fail', error: { code: 'turn_limit', message: `the model was still calling tools after ${turn} turns (limit ${input.settings.maxTurns})` } };
        }
        return generate(turn + 1);
      },
    },
  });
}
