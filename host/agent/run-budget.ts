import type { Environment } from '../../environment';
import { BerthError } from '../errors';
import type { PhaseContext } from '../kernel';
import type { Task } from '../model';
import type { ExecOptions, ExecResult } from '../sandbox';
import { ToolCallInputSchema, type AgentRunInput, type ToolCallInput } from './agent-input';
import { TOOL_KIND } from './agent-sandbox';
import type { CallOrder } from './call-order';
import { ToolTaskResultSchema } from './tool-result';

/*
 * resources.runBudgetS: the commands of a run's tool calls may take that long in all, as the
 * commands of a plan run's steps may. The time used is committed state: each tool task's result
 * holds what its commands took (`commandMs`), the root's checkpoint the sum of the finished turns
 * (`usedMs`), and each turn's generation task and tool task inputs what was left when the turn
 * began (`budgetMs`). A call gets what is left of its turn's budget after its siblings' commands;
 * a host that dies and resumes reads all of it back from the store.
 */

/** The bound as messages name it: the setting and its value, never a host path. */
export const budgetBound = (env: Environment) => `its budget of ${env.resources.runBudgetS} s (resources.runBudgetS: the commands of its tool calls in all)`;

/** The whole budget, for a run with nothing used yet (and for inputs an older host committed without `budgetMs`). */
export const wholeBudgetMs = (env: Environment) => env.resources.runBudgetS * 1000;

const commandMsOf = (result: unknown) => {
  const r = ToolTaskResultSchema.safeParse(result);
  return r.success ? (r.data.commandMs ?? 0) : 0;
};

/**
 * What is left of the run's budget for this call: its turn's budget less what the commands of the
 * turn's other calls took. Read with the session's sandbox held (no other call's command runs).
 * A sibling whose sandbox work ended here may not have committed its result yet (its phase has
 * returned, the commit follows): its result is taken from `order`, which kept it.
 */
export async function callBudgetLeft(ctx: Pick<PhaseContext, 'task' | 'store'>, order: CallOrder, input: AgentRunInput, call: ToolCallInput): Promise<number> {
  const turnMs = call.budgetMs ?? wholeBudgetMs(input.environment);
  const parentId = ctx.task.parentId;
  if (parentId === null) return turnMs;
  const siblings = (await ctx.store.listTasks({ parentId })).filter((t) => t.kind === TOOL_KIND && t.id !== ctx.task.id);
  let used = 0;
  for (const t of siblings) used += commandMsOf(t.status === 'terminal' ? t.result : order.finishedResult(t.id));
  return turnMs - used;
}

/**
 * One call's share of the budget while it runs: every command it starts is cut to what is left,
 * and counted. A command cut off at the budget `stopped` the call; a command asked for with
 * nothing left is not started (`run_budget_exceeded`).
 */
export class CommandBudget {
  usedMs = 0;
  stopped = false;
  /** Something ran or was written before a command was refused: the call did not end untouched. */
  private touched = false;

  constructor(
    readonly leftMs: number,
    private readonly env: Environment,
    private readonly defaultTimeoutMs: number,
  ) {}

  /** The command's options with its time cut to the budget left; throws when nothing is left. */
  limit(opts: ExecOptions): { opts: ExecOptions; cut: boolean } {
    const left = this.leftMs - this.usedMs;
    if (left <= 0) {
      const err = new BerthError('run_budget_exceeded', `this call did not run: the run's commands used up ${budgetBound(this.env)}`);
      throw Object.assign(err, { untouched: !this.touched });
    }
    const asked = opts.timeoutMs === undefined ? this.defaultTimeoutMs : opts.timeoutMs;
    // 0 asks for no timeout at all; the budget still bounds it. Never 0 here: that would lift the bound.
    const cut = asked <= 0 || asked > left;
    return { opts: cut ? { ...opts, timeoutMs: Math.max(1, Math.ceil(left)) } : opts, cut };
  }

  counted(r: ExecResult, cut: boolean): void {
    this.touched = true;
    this.usedMs += r.durationMs;
    if (cut && r.timedOut) this.stopped = true;
  }

  wrote(): void {
    this.touched = true;
  }

  /** The text the model reads before the tool's own output when its command was stopped at the budget. */
  stoppedText(): string {
    return `error: the command was stopped after ${seconds(this.usedMs)} s: the run's commands used up ${budgetBound(this.env)}; no further command of this run is started.`;
  }
}

/** A refusal thrown by {@link CommandBudget.limit} before the call did anything: provably not applied. */
export const refusedUntouched = (err: unknown) => err instanceof BerthError && err.code === 'run_budget_exceeded' && (err as { untouched?: boolean }).untouched === true;

const seconds = (ms: number) => (ms / 1000).toFixed(1);

/**
 * What a turn's calls did with the budget, from their committed results: the command time, and
 * the first call (in the model's order) that the budget stopped or did not start, if any.
 */
export function turnBudgetUse(children: Task[]): { commandMs: number; stop?: string } {
  let commandMs = 0;
  let stop: { index: number; text: string } | undefined;
  for (const t of children) {
    if (t.kind !== TOOL_KIND || t.status !== 'terminal') continue;
    const r = ToolTaskResultSchema.safeParse(t.result);
    if (!r.success) continue;
    commandMs += r.data.commandMs ?? 0;
    if (!r.data.budget) continue;
    const call = ToolCallInputSchema.safeParse(t.input);
    const index = call.success ? call.data.index : Number.MAX_SAFE_INTEGER;
    const name = call.success ? ` (${call.data.name})` : '';
    if (stop && stop.index <= index) continue;
    stop = { index, text: r.data.budget === 'stopped' ? `call ${r.data.toolCallId}${name} was stopped after ${seconds(r.data.commandMs ?? 0)} s` : `call ${r.data.toolCallId}${name} was not started` };
  }
  return { commandMs, ...(stop ? { stop: stop.text } : {}) };
}

/** The run's failure when a turn's call met the budget. */
export function budgetExceeded(env: Environment, turn: number, stop: string): { code: 'run_budget_exceeded'; message: string } {
  return { code: 'run_budget_exceeded', message: `turn ${turn}: ${stop}: the run's commands used up ${budgetBound(env)}` };
}
