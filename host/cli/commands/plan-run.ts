import { didLine, foundLine, resumeVerb, sandboxDid, sandboxFound, snapshotsBefore } from '../../api/resume-report';
import { drive, startHost, takeRun } from '../../api/drive';
import { leftoverTasks, leftoversAfter, leftoversLine, tasksWord, unfinishedInSession } from '../../api/ended-runs';
import { ownerOf } from '../../api/decisions';
import { BerthError } from '../../errors';
import type { Run } from '../../model';
import { cancel } from '../../api/decisions';
import { preparePlan, startPlan, stepCount, submitDetached } from '../../api/plans';
import { leaseTtlMs, operator } from '../../api/runtime';
import { isBerthError } from '../../errors';
import { isFinalRunState, type RunState } from '../../model';
import { faultHold } from '../../support';
import { loadPlan, runSteps } from '../../plan';
import type { CliContext } from '../context';
import { emit, runExit } from '../output';
import { EXIT } from '../host-right';
import { getRunOrThrow } from './runs';
import { detachedAnswer } from './detached';
import { progressPrinter } from './progress';
import { followRun, startAgentHost } from './agent-host';
import { finishAgentRun } from './agent-run';
import { finishDriven } from './run-summary';

export { operator } from '../../api/runtime';
export { commitCancel } from '../../api/decisions';
export { stepCount } from '../../api/plans';

/** `berth run PLAN [--detach]`: `--detach` submits the run for a `berth worker` and returns at once. */
export async function runPlan(ctx: CliContext, file: string, requestId?: string, detach = false, tags: string[] = []): Promise<number> {
  const loaded = await preparePlan(ctx, await loadPlan(file));
  if (detach) {
    const { run, created } = await submitDetached(ctx, loaded, { requestId, tags });
    emit(ctx.json, detachedAnswer(run, created), () => `${created ? 'submitted' : 'already submitted as'} run ${run.id} (${loaded.plan.steps.length} steps); a berth worker on ${ctx.store.location} drives it (berth show ${run.id})`);
    return EXIT.ok;
  }
  // The acceptance command, when the plan has one, runs as the last step.
  const total = runSteps(loaded.plan).length;
  const { rt, run, created, swept } = await startPlan(ctx, loaded, { requestId, onProgress: progressPrinter(ctx.json, () => total) });
  sayswept(ctx, swept);
  if (!ctx.json) process.stderr.write(`${created ? 'started' : 'already submitted as'} run ${run.id} (${loaded.plan.steps.length} steps, image ${loaded.environment.image.ref})\n`);
  return finishDriven(ctx, rt, run.id);
}

const sayswept = (ctx: CliContext, n: number) => {
  if (n && !ctx.json) process.stderr.write(`  swept ${n} leftover container(s)\n`);
};

/**
 * `berth resume RUN [--take-over]`: this host claims the run's session (see takeRun) and drives it.
 * `endsWell`: a state besides `completed` the run may end in as this command's success (berth cancel's `cancelled`).
 */
export async function resumeRun(ctx: CliContext, runId: string, opts: { takeOver?: boolean; leaseTtl?: string; endsWell?: RunState } = {}): Promise<number> {
  const run = await getRunOrThrow(ctx.store, runId);
  const ttlMs = leaseTtlMs(opts.leaseTtl);
  const alone = isFinalRunState(run.state) ? await endedRunAlone(ctx, run) : undefined;
  if (alone !== undefined) return alone;
  if (run.kind === 'agent') {
    // An agent run continues with the same live view as berth agent: conversation and tool calls.
    const host = await startAgentHost(ctx, ttlMs);
    const epoch = await takeRun(ctx, host.rt, run, { takeOver: opts.takeOver, actor: operator() });
    const leftovers = await leftoverTasks(ctx.store, run);
    // What the resume finds of the session's sandbox (the next tool verifies it again, and restores it when gone).
    const found = await sandboxFound(ctx, host.rt, run);
    const before = await snapshotsBefore(ctx, run);
    if (!ctx.json) process.stderr.write(`${resumeVerb(runId, run)} as its owner (epoch ${epoch}); ${foundLine(found, run, leftovers.length)}\n`);
    const ended = await followRun(ctx, host, run);
    const did = await sandboxDid(ctx, host.rt, run, found, before);
    const settled = await leftoversAfter(ctx.store, leftovers);
    return finishAgentRun(ctx, ended, { json: { resume: { epoch, sandbox: { found, did }, leftovers: settled } }, line: [didLine(did, run.state === 'cancelling'), settled ? leftoversLine(runId, settled) : ''].filter(Boolean).join('\n') }, settled?.settled ? ended.state : opts.endsWell);
  }
  const total = await stepCount(ctx, run);
  const { rt, swept } = await startHost(ctx, { ttlMs, onProgress: progressPrinter(ctx.json, () => total) });
  sayswept(ctx, swept);
  const epoch = await takeRun(ctx, rt, run, { takeOver: opts.takeOver, actor: operator() });
  await faultHold('resume.claimed');
  // An ended run with live tasks (its host was killed right after `reconcile --fail` committed):
  // settling them is what this resume is for, and when it does, the command did its job (exit 0)
  // whatever state the run ended in. Read after the claim: a host that settled them meanwhile has.
  const leftovers = await leftoverTasks(ctx.store, run);
  // What the resume finds of the sandbox (the driven run verifies it again, and restores it when gone).
  const found = await sandboxFound(ctx, rt, run);
  const before = await snapshotsBefore(ctx, run);
  if (!ctx.json) process.stderr.write(`${resumeVerb(runId, run)} as its owner (epoch ${epoch}${total ? `, ${total} steps` : ''}); ${foundLine(found, run, leftovers.length)}\n`);
  return finishDriven(ctx, rt, runId, async () => {
    const did = await sandboxDid(ctx, rt, run, found, before);
    const settled = await leftoversAfter(ctx.store, leftovers);
    return { json: { resume: { epoch, sandbox: { found, did }, leftovers: settled } }, line: [didLine(did, run.state === 'cancelling'), settled ? leftoversLine(runId, settled) : ''].filter(Boolean).join('\n'), ok: settled?.settled === true };
  }, opts.endsWell);
}

/**
 * A resume of an ended run whose session holds another unfinished run that no live host drives (an
 * agent session: an earlier message's run, the newer one's host killed): taking the session would
 * drive that run too (carry on its work, decide its call in flight) and stop it again once this one
 * settled. So the session is not taken: with nothing of this run left to do the resume says so and
 * exits as the run ended; with tasks a killed host left live in it, it is refused naming the two
 * commands that settle both. Undefined: resume as usual.
 */
async function endedRunAlone(ctx: CliContext, run: Run): Promise<number | undefined> {
  const other = await unfinishedInSession(ctx.store, run);
  if (!other || (await ownerOf(ctx, run))?.live) return undefined;
  const b = other.runId;
  const commands = b ? `berth resume ${b} continues it, berth cancel ${b} stops it` : 'a host that drives the session settles it';
  const leftovers = await leftoverTasks(ctx.store, run);
  if (leftovers.length) {
    throw new BerthError(
      'session_run_unfinished',
      `run ${run.id} ended (${run.state}) with ${tasksWord(leftovers.length)} a stopped host left live, but its session has unfinished run ${b ?? '(none)'} that no host drives, and taking the session here would carry on its work: nothing was changed. ${commands}; either settles this run's tasks too`,
      { ids: { runId: run.id, sessionId: run.sessionId }, details: { unfinishedRunId: b, leftovers: leftovers.map((t) => t.id) } },
    );
  }
  const reason = (await ctx.store.listRunTransitions(run.id)).at(-1)?.reason ?? '';
  const line = `run ${run.id} already ended (${run.state}): nothing is run again. Its session's run ${b ?? '(none)'} is unfinished and was not driven here: ${commands}`;
  const json = { resume: { claimed: false, unfinishedRunId: b, leftovers: null } };
  if (run.kind === 'agent') return finishAgentRun(ctx, run, { json, line });
  emit(ctx.json, { run, reason, ...json }, () => line);
  return runExit(run, reason);
}

/**
 * `berth cancel RUN`: commits the intent. The host driving the run carries it out; with no live
 * host, this command does (as `berth resume` would): it stops what the run left running in its
 * sandboxes, records where each task stopped and ends the run, so nothing of a cancelled run goes
 * on waiting for somebody to resume it.
 */
export async function cancelRun(ctx: CliContext, runId: string): Promise<number> {
  const { run, owner: host, already } = await cancel(ctx, runId, operator());
  const here = !host?.live && !isFinalRunState(run.state) && (run.kind === 'plan' || run.kind === 'agent');
  const committed = already === 'cancelling' ? `cancel of run ${runId} was committed before` : `cancel of run ${runId} committed`;
  if (!here) {
    emit(ctx.json, { runId, requested: true, already: already ?? null, owner: host }, () =>
      host?.live
        ? `${committed}; host ${host.hostId}${host.pid ? ` (pid ${host.pid})` : ''} drives it and stops it now`
        : already === 'cancelled' ? `run ${runId} is already cancelled`
        : isFinalRunState(run.state) ? `run ${runId} is ${run.state}` : `${committed}; no live host drives it: berth resume ${runId} finishes the cancellation`,
    );
    return EXIT.ok;
  }
  await faultHold('cancel.committed');
  if (!ctx.json) process.stderr.write(`${committed}; no live host drives it, so this one carries it out\n`);
  try {
    // The cancel did what it was asked: a run that ends cancelled is this command's success, not a failure to report.
    return await resumeRun(ctx, runId, { endsWell: 'cancelled' });
  } catch (err) {
    // A host claimed the run between the read above and this one's claim (a resume, a worker): it
    // drives the run now and carries the committed cancel out. Reported as refused ("nothing was
    // changed", exit 1), the cancel that had been committed read as one that had not.
    if (!isBerthError(err, 'run_owned')) throw err;
    const o = (err.details as { owner?: { holder: string; pid: number | null } } | undefined)?.owner;
    emit(ctx.json, { runId, requested: true, already: already ?? null, owner: o ? { hostId: o.holder, pid: o.pid, live: true } : null }, () =>
      `${committed}; host ${o?.holder ?? '?'}${o?.pid ? ` (pid ${o.pid})` : ''} took the run meanwhile: it drives it and carries the cancel out`,
    );
    return EXIT.ok;
  }
}

export { drive };
