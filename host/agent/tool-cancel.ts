import { resolveFlag } from '../../tools';
import type { Effect, Task } from '../model';
import type { Store } from '../store';
import { runInputOf, type AgentDeps } from './agent-deps';

/** The reason a cancelled call's effect is settled with (`failed`, code `cancelled_not_applied`). */
export const CANCELLED_SAFE_CALL = 'cancelled in flight; a safe call in a sandbox with no network changed nothing';

/**
 * A cancelled call whose action was in flight changed nothing when it may be repeated (`safe`),
 * says it leaves the sandbox as it was (`mutates` false: the reads, `exec` with `safe: true`), and
 * ran in a sandbox with no network: it is settled as not applied, so the cancel ends the run
 * `cancelled` instead of asking for a decision whose answer cannot matter (a plan's safe step is
 * settled the same way: host/plan/step-cancel.ts). A call that may change the sandbox stays
 * `unknown` even then: unlike a plan run's, the session's sandbox outlives the run, and the next
 * call works in whatever the cut-off command left there.
 */
export function settleCancelledCall(deps: Pick<AgentDeps, 'tools'>) {
  return async (task: Task, effect: Effect, d: { store: Store }): Promise<{ status: 'not_applied'; reason: string } | null> => {
    if (effect.replay !== 'safe' || !effect.kind.startsWith('tool.')) return null;
    const input = await runInputOf(d.store, task);
    if (input.environment.network.mode !== 'none') return null;
    const { tool: name, args } = (effect.intent ?? {}) as { tool?: string; args?: unknown };
    const tool = name === undefined ? undefined : deps.tools.get(name);
    if (!tool || tool.snapshots === true || resolveFlag(tool.mutates, args)) return null;
    return { status: 'not_applied', reason: CANCELLED_SAFE_CALL };
  };
}
