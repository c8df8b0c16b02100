import { acceptanceOf } from '../../acceptance';
import { acceptanceLine } from '../../api/decisions';
import { drive } from '../../api/drive';
import { BerthError } from '../../errors';
import type { Run, RunState, Task } from '../../model';
import { pagesOf } from '../../store';
import { collectIfGrown } from '../../support/heap-bound';
import { runSteps, type PlanRunInput, type StepResult } from '../../plan';
import type { HostRuntime } from '../../runtime/host-runtime';
import type { CliContext } from '../context';
import { EXIT } from '../host-right';
import { runLeft, stopSignals } from '../stop-signals';
import { duration, emit, emitWithList, runExit, table } from '../output';
import { timed } from '../../snapshot/timing';

/**
 * Drives the run through the API until it settles (run-end policy included there) and prints its
 * summary; Ctrl-C or SIGTERM stops the host without deciding anything (`berth resume` continues).
 */
/**
 * `after`, when given, adds what the caller has to say once the run settled (a resume: what it did
 * with the sandbox); its `ok` makes the run's final state, whatever it is, this command's success
 * (a resume that settled what a killed host left live in an ended run).
 */
export async function finishDriven(ctx: CliContext, rt: HostRuntime, runId: string, after?: () => Promise<After>, endsWell?: RunState): Promise<number> {
  const stop = new AbortController();
  let by: NodeJS.Signals | undefined;
  const signals = stopSignals(runLeft(runId), (signal) => {
    by = signal;
    stop.abort(new BerthError('interrupted', 'stopped by signal'));
  });
  try {
    // The summary is printed as soon as the run settled, before its sandbox's removal and retention end.
    let printed: string | undefined;
    let ok = false;
    const extra = async () => {
      const a = await after?.();
      ok = a?.ok === true;
      return a;
    };
    const d = await drive(ctx, rt, runId, stop.signal, { settled: async (run) => void (printed = await timed(ctx.logger, 'cli.summary', async () => summary(ctx, run, await extra()))) });
    if (!d.settled) {
      // With --json the result line is still the last one (a script reads it to learn the run stopped, not ended).
      if (ctx.json) emit(true, { run: d.run, stopped: { signal: by ?? null, resume: `berth resume ${runId}` } }, () => '');
      else process.stderr.write(`\nstopped; the run keeps its sandbox. Continue with: berth resume ${runId}\n`);
      return EXIT.signal;
    }
    const reason = printed ?? (await summary(ctx, d.run, await extra()));
    return runExit(d.run, reason, ok ? d.run.state : endsWell);
  } finally {
    signals.dispose();
  }
}

/** What a caller of {@link finishDriven} adds to the summary. */
export interface After {
  json: Record<string, unknown>;
  line: string;
  ok?: boolean;
}

/** Rows per read of the summary's lists. */
const PAGE = 500;
/** The heap's slack while the summary reads its pages (the export's: support/heap-bound.ts). */
const END_SLACK_MB = 4;

type StepLine = Partial<StepResult> & { step: string | undefined; outcome: Task['outcome']; status: Task['status']; code: string | undefined; acceptedBy?: string };

async function summary(ctx: CliContext, run: Run, extra?: { json: Record<string, unknown>; line: string }): Promise<string> {
  const root = run.rootTaskId ? await ctx.store.getTask(run.rootTaskId) : undefined;
  const plan = (root?.input as unknown as PlanRunInput | undefined)?.plan;
  const names = (plan?.steps ? runSteps(plan) : []).map((s) => s.name);
  // Read page by page, each step's line kept and its row dropped: the summary of a long run holds
  // its lines, not every row of the run at once. The pages' garbage is collected at a smaller
  // slack than a run's commits: a 3,000-step run's end read ~40 MB of rows it kept nothing of,
  // and its heap grew past anything its 3,000 steps had needed (bench/RESULTS.md, session 19).
  const steps: StepLine[] = [];
  const interrupted: StepLine[] = [];
  for await (const page of pagesOf((p) => ctx.store.listTasks({ runId: run.id, page: p }), PAGE, () => collectIfGrown(END_SLACK_MB))) {
    for (const t of page) {
      if (t.kind !== 'plan-step') continue;
      // A step stopped by cancel has no command result; its name comes from the plan, its outcome says cancelled.
      const r = (t.result ?? t.error?.details ?? {}) as Partial<StepResult>;
      const line: StepLine = { step: names[(t.input as { index?: number }).index ?? -1], outcome: t.outcome, status: t.status, code: t.error?.code, ...r };
      steps.push(line);
      if (t.outcome === 'interrupted' && r.step) interrupted.push(line);
    }
  }
  // A step caught in flight stays `interrupted` in its task; when the operator vouched for its
  // effect (--accept), the table says so rather than leaving it looking unresolved. Only then are
  // the run's effects read (a run with no interrupted step has none to look up).
  if (interrupted.length) {
    const acceptedBy = new Map<string, string>();
    for await (const page of pagesOf((p) => ctx.store.listEffects({ runId: run.id, page: p }), PAGE, () => collectIfGrown(END_SLACK_MB))) {
      for (const e of page) {
        const receipt = e.receipt as { decision?: string; by?: string } | null;
        const step = (e.intent as { step?: string } | null)?.step;
        if (e.status === 'confirmed' && receipt?.decision === 'accept' && step) acceptedBy.set(step, receipt.by ?? 'operator');
      }
    }
    for (const line of interrupted) {
      const by = acceptedBy.get(line.step!);
      if (by) line.acceptedBy = by;
    }
  }
  // What the pages left is collected before the summary's text is built beside the lines (a long run's is megabytes).
  collectIfGrown(END_SLACK_MB);
  const transitions = await ctx.store.listRunTransitions(run.id);
  const reason = transitions.at(-1)?.reason ?? '';
  const acceptance = await acceptanceOf(ctx.store, run);
  emitWithList(ctx.json, { run, reason, steps, acceptance, ...extra?.json }, 'steps', () =>
    [
      '',
      // A run that ended before its first step (cancelled while admitted, say) has no row to show under a header.
      steps.length === 0 ? 'no step ran' : table([['STEP', 'RESULT', 'EXIT', 'TIME', 'SNAPSHOT'], ...steps.map((s) => [s.step ?? '?', s.acceptedBy ? `accepted by ${s.acceptedBy}` : s.rewind !== undefined ? `rewound to step ${s.rewind + 1}` : s.alreadyDone ? 'ran before' : s.code && s.code !== 'step_failed' ? s.code : (s.outcome ?? s.status), String(s.exitCode ?? '-'), s.durationMs === undefined ? '-' : duration(s.durationMs), s.snapshotId ?? '-'])]),
      '',
      `run ${run.id}: ${run.state}${reason ? ` (${reason})` : ''}`,
      ...(extra?.line ? [extra.line] : []),
      ...(acceptance.state === 'none' ? [] : [`acceptance: ${acceptanceLine(acceptance, run.id)}`]),
      run.state === 'needs_reconciliation' ? `decide with: berth reconcile ${run.id} [--accept | --reject-effect] [--restore SNAPSHOT] | --fail   (berth show ${run.id} lists snapshots)` : '',
    ].filter((l, i, a) => l !== '' || i !== a.length - 1).join('\n'),
  );
  return reason;
}
