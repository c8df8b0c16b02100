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
 * commands of a plan run's steps may, plus the ending of the one command running when it runs
 * out (README). The time used is committed state: each tool task's result holds what its
 * commands took (`commandMs`), the root's checkpoint the sum of the finished turns
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
 * One call's share of the budget: every command the call makes in the sandbox (its plan's, its
 * run's, its verification's, the exposure of its secret files) is timed from when it is asked
 * for to when its answer is back, and that is what is counted; a command of the plan or the run
 * is killed at the instant that clock reaches what is left (`deadline`, the same clock), so a
 * cut command counts what was left plus only its own ending (the kill and the exec's tear-down).
 * A command, or a call without one, asked for with nothing left does not run
 * (`run_budget_exceeded`).
 */
export class CommandBudget {
  usedMs: number;
  stopped = false;
  /** Settling the record of an earlier attempt (verify): counted, but never cut nor refused (see README). */
  settling = false;
  /** Something ran or was written before a command was refused: the call did not end untouched. */
  private touched = false;

  /** `leftMs`: what the call's turn left it; `usedMs`: what the call already used (its plan, in an earlier phase). */
  constructor(
    readonly leftMs: number,
    private readonly env: Environment,
    usedMs = 0,
  ) {
    this.usedMs = usedMs;
  }

  /** What is left now, in milliseconds (0 or less: spent). */
  get left(): number {
    return this.leftMs - this.usedMs;
  }

  /**
   * Throws when the budget is spent: no call acts after that, whether it runs a command or not
   * (a `write_file`, and a `read_file` too: the run ends at this turn, so nothing would read it).
   */
  assertLeft(): void {
    if (this.left > 0) return;
    const err = new BerthError('run_budget_exceeded', `this call did not run: the run's commands used up ${budgetBound(this.env)}`);
    throw Object.assign(err, { untouched: !this.touched });
  }

  /**
   * The command's options with a deadline where what is left runs out, on the clock `counted`
   * uses (`askedAt`, `performance.now()` before anything of the exec): its setup is counted, so
   * it is not given to the command again. Throws when nothing is left.
   */
  limit(opts: ExecOptions, askedAt: number): ExecOptions {
    if (this.settling) return opts;
    this.assertLeft();
    return { ...opts, deadline: askedAt + this.left };
  }

  /**
   * A command's answer, `ms` from asked to answered. Killed with the budget spent: it was stopped
   * at the budget (by the deadline, or by its own timeout when that came as late).
   */
  counted(ms: number, r: ExecResult): void {
    this.touched = true;
    this.usedMs += ms;
    if (r.timedOut && !this.settling && this.left <= 0) this.stopped = true;
  }

  /** Time the call spent in the sandbox outside a command of its own (a sweep of stale secret files). */
  spent(ms: number): void {
    this.usedMs += ms;
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
