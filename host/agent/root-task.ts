import type { Decision, TaskHandler } from '../kernel';
import { checkpointOf, json, runInputOf, type AgentDeps } from './agent-deps';
import type { AgentRunInput, GenerationInput } from './agent-input';
import { GENERATE_KIND, type GenerationResult } from './generation-task';

export const AGENT_KIND = 'agent';

interface RootCheckpoint {
  turn: number;
}

const generate = (turn: number, writes?: Decision['writes']): Decision => ({
  type: 'spawn',
  join: 'allSettled',
  phase: 'generated',
  checkpoint: json({ turn } satisfies RootCheckpoint),
  tasks: [{ kind: GENERATE_KIND, input: json({ turn } satisfies GenerationInput) }],
  ...(writes ? { writes } : {}),
});

/**
 * The root of an agent run: readies the session's sandbox, then runs one generation task per
 * model turn until the model answers without tool calls or the turn limit is reached.
 */
export function agentRootHandler(deps: AgentDeps): TaskHandler {
  return {
    kind: AGENT_KIND,
    version: 1,
    initialPhase: 'start',
    restartLimit: 10,
    maxRetries: 8,
    phases: {
      start: async (ctx) => {
        const input = ctx.input as unknown as AgentRunInput;
        const acq = await deps.sandbox.exclusive(ctx.task.sessionId, () => deps.sandbox.open(ctx, input));
        // Nothing has run yet in this run, so there is nothing to reconcile: the run fails, saying why.
        if (acq.kind === 'reconcile') return { type: 'fail', error: { code: 'sandbox_unusable', message: `the session's sandbox cannot be used: ${acq.reason}` } };
        return generate(1, acq.writes);
      },
      generated: async (ctx) => {
        const input = await runInputOf(deps.store, ctx.task);
        const { turn } = checkpointOf<RootCheckpoint>(ctx);
        const gen = (await ctx.children()).at(-1)!;
        if (gen.outcome !== 'ok') {
          return { type: 'fail', error: { code: gen.error?.code ?? 'generation_failed', message: `turn ${turn}: ${gen.error?.message ?? gen.outcome}` } };
        }
        const result = gen.result as unknown as GenerationResult;
        if (result.final) return { type: 'complete', result: json({ answer: result.content, turns: turn }) };
        if (turn >= input.settings.maxTurns) {
          return { type: 'fail', error: { code: 'turn_limit', message: `the model was still calling tools after ${turn} turns (limit ${input.settings.maxTurns})` } };
        }
        return generate(turn + 1);
      },
    },
  };
}
