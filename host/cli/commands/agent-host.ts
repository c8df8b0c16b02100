import { BerthError } from '../../errors';
import { isFinalRunState, type Run, type RunState } from '../../model';
import type { HostRuntime } from '../../runtime/host-runtime';
import { startHost, whileHoldingRight } from '../../api/drive';
import { stopRuntime } from '../../api/run-end';
import { sessionLeftoversSettled, tasksSettled } from '../../api/tasks-settled';
import type { CliContext } from '../context';
import { agentPrinter } from './agent-output';
import { emit, runExit } from '../output';
import { runLeft, stopSignals } from '../stop-signals';

/** The host of one `berth agent|chat` invocation with live output wired to its commits. */
export async function startAgentHost(ctx: CliContext, ttlMs?: number): Promise<{ rt: HostRuntime; printer: ReturnType<typeof agentPrinter> }> {
  const printer = agentPrinter(ctx.json);
  const { rt, swept } = await startHost(ctx, { ttlMs, onAgentLive: (e) => printer.live(e) });
  if (swept && !ctx.json) process.stderr.write(`  swept ${swept} leftover container(s)\n`);
  return { rt, printer };
}

const SETTLED: Run['state'][] = ['completed', 'failed', 'cancelled', 'compensated', 'needs_reconciliation'];

/**
 * Follows one run until it settles, printing every entry and run transition as it commits.
 * Ctrl-C stops the host without deciding anything (`berth resume RUN` continues). While the run
 * awaits an approval the host keeps waiting: approve or deny from another terminal.
 */
export async function followRun(ctx: CliContext, host: Awaited<ReturnType<typeof startAgentHost>>, run: Run): Promise<Run> {
  const { rt, printer } = host;
  let seq = 0;
  let transitions = 0;
  const catchUp = async () => {
    for (const e of await ctx.store.listEntries(run.sessionId, { afterSeq: seq })) {
      seq = e.seq;
      if (e.runId === run.id) printer.entry(e);
    }
    const all = await ctx.store.listRunTransitions(run.id);
    for (const t of all.slice(transitions)) printer.state(run.id, t.to, t.reason);
    transitions = all.length;
  };
  // Printing is best effort: a read that fails (a busy store under load) is retried at the next
  // commit or poll, since `seq` only moves on success. A rejection left in the chain would end
  // the process as an unhandled rejection while the run itself is fine.
  const safeCatchUp = () => catchUp().catch((err: unknown) => ctx.logger.warn({ err, runId: run.id }, 'could not read the run\'s new entries; trying again'));
  let chain = safeCatchUp();
  const off = rt.kernel.onCommit((e) => {
    if (e.sessionId === run.sessionId) chain = chain.then(safeCatchUp);
  });
  // Decisions by other processes (approve, deny, cancel) commit outside this kernel.
  const poll = setInterval(() => (chain = chain.then(safeCatchUp)), 500);
  const stop = new AbortController();
  const signals = stopSignals(runLeft(run.id), () => stop.abort(new BerthError('interrupted', 'stopped by signal')));
  try {
    const done = await whileHoldingRight(rt.kernel, run.id, rt.kernel.waitForRun(run.id, { signal: stop.signal, states: SETTLED }), run.sessionId);
    // An ended run's live tasks (a resumed run `reconcile --fail` ended) are settled before this host stops.
    if (isFinalRunState(done.state)) await tasksSettled(ctx.store, rt.kernel, run.id);
    // And those of the session's other ended runs, which this host owns as well (see sessionLeftoversSettled).
    await sessionLeftoversSettled(ctx.store, rt.kernel, run.sessionId, run.id);
    await chain;
    await catchUp();
    return done;
  } catch (err) {
    if (stop.signal.aborted) {
      process.stderr.write(`\nstopped; the run keeps its state and sandbox. Continue with: berth resume ${run.id}\n`);
      throw new BerthError('interrupted', `run ${run.id} left ${(await ctx.store.getRun(run.id))?.state}`, { ids: { runId: run.id } });
    }
    throw err;
  } finally {
    stop.abort(); // ends waitForRun's polling when the right was lost
    off();
    clearInterval(poll);
    signals.dispose();
    // Background snapshot loads finish before the store closes (they write to it).
    await stopRuntime(ctx, rt);
  }
}

/** The agent run's final state and answer, and the exit code that goes with it. */
/** `extra`: what the caller has to add once the run settled (a resume: what it did with the sandbox). */
export async function finishAgentRun(ctx: CliContext, run: Run, extra?: { json: Record<string, unknown>; line: string }, endsWell?: RunState): Promise<number> {
  const root = run.rootTaskId ? await ctx.store.getTask(run.rootTaskId) : undefined;
  const answer = (root?.result as { answer?: string | null } | null)?.answer ?? null;
  const reason = (await ctx.store.listRunTransitions(run.id)).at(-1)?.reason ?? '';
  emit(ctx.json, { run, answer, error: root?.error ?? null, ...extra?.json }, () =>
    [`\nrun ${run.id} (session ${run.sessionId}): ${run.state}${run.state === 'completed' ? '' : ` (${reason})`}`, extra?.line ?? '', answer ? `\n${answer}` : '', run.state === 'completed' ? `continue with: berth chat ${run.sessionId} "..."` : ''].filter(Boolean).join('\n'),
  );
  return runExit(run, reason, endsWell);
}
