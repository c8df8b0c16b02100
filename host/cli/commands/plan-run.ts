import { didLine, foundLine, resumeVerb, sandboxDid, sandboxFound, snapshotsBefore } from '../../api/resume-report';
import { drive, startHost, takeRun } from '../../api/drive';
import { leftoverTasks, leftoversAfter, leftoversLine, tasksWord, unfinishedInSession } from '../../api/ended-runs';
import { ownerOf } from '../../api/decisions';
import { BerthError } from '../../errors';
import type { Run } from '../../model';
import { cancel } from '../../api/decisions';
import { waitForCancelTurn } from '../../api/cancel-wait';
import { duration } from '../../api/duration';
import type { OwnerClaim } from '../../api/owner-claim';
import type { HostView } from '../../api/run-driver';
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
export async function resumeRun(ctx: CliContext, runId: string, opts: { takeOver?: boolean; leaseTtl?: string; endsWell?: RunState; json?: Record<string, unknown> } = {}): Promise<number> {
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
    return finishAgentRun(ctx, ended, { json: { resume: { epoch, sandbox: { found, did }, leftovers: settled }, ...opts.json }, line: [didLine(did), settled ? leftoversLine(runId, settled) : ''].filter(Boolean).join('\n') }, settled?.settled ? ended.state : opts.endsWell);
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
    return { json: { resume: { epoch, sandbox: { found, did }, leftovers: settled }, ...opts.json }, line: [didLine(did), settled ? leftoversLine(runId, settled) : ''].filter(Boolean).join('\n'), ok: settled?.settled === true };
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
 * `berth cancel RUN [--wait]`: commits the intent. The host driving the run carries it out; with no live
 * host, this command does (as `berth resume` would): it stops what the run left running in its
 * sandboxes, records where each task stopped and ends the run, so nothing of a cancelled run goes
 * on waiting for somebody to resume it. A live owner that no longer renews its claim (frozen by
 * SIGSTOP, a paused VM, overloaded) carries nothing out until it runs again: that is said, with
 * when its claim expires. `wait`: waits until the run ended, and when its owner's claim expires
 * first, carries the cancel out here (a new epoch: the old owner's commits are refused once it wakes).
 */
export async function cancelRun(ctx: CliContext, runId: string, opts: { wait?: boolean } = {}): Promise<number> {
  const { run, owner: host, claim, already } = await cancel(ctx, runId, operator());
  const committed = already === 'cancelling' ? `cancel of run ${runId} was committed before` : `cancel of run ${runId} committed`;
  const drivable = !isFinalRunState(run.state) && (run.kind === 'plan' || run.kind === 'agent');
  const which: CancelCase = isFinalRunState(run.state) ? 'ended' : !host?.live ? 'no_live_host' : claim?.state === 'overdue' ? 'owner_overdue' : 'owner_renews';
  if (drivable && host?.live && opts.wait) {
    if (!ctx.json) process.stderr.write(`${ownerLine(committed, runId, host, claim, true)}
`);
    const end = await waitForCancelTurn(ctx, runId, {
      onClaim: (c, o) => {
        if (!ctx.json) process.stderr.write(c.state === 'renewing' ? `host ${o.hostId} renews its claim again: it stops the run now; waiting for it to end\n` : `${overdueLine(o, c, runId, true)}\n`);
      },
    });
    if (end.kind === 'ended') {
      emit(ctx.json, { runId, requested: true, already: already ?? null, owner: host, case: which, claim, wait: { outcome: 'ended', waitedMs: end.waitedMs }, state: end.run.state }, () =>
        `run ${runId} is ${end.run.state}: its owner, host ${host.hostId}, carried the cancel out (waited ${duration(end.waitedMs)})`,
      );
      return EXIT.ok;
    }
    if (!ctx.json) process.stderr.write(`the claim of host ${host.hostId}${host.pid ? ` (pid ${host.pid})` : ''} expired without a renewal (waited ${duration(end.waitedMs)}): this one carries the cancel out; the old host's commits are refused from now on\n`);
    return carryOut(ctx, runId, already, { case: which, claim, wait: { outcome: 'carried_out', waitedMs: end.waitedMs } });
  }
  if (!drivable || host?.live) {
    emit(ctx.json, { runId, requested: true, already: already ?? null, owner: host, case: which, claim, wait: null }, () =>
      host?.live
        ? ownerLine(committed, runId, host, claim, false)
        : already === 'cancelled' ? `run ${runId} is already cancelled`
        : isFinalRunState(run.state) ? `run ${runId} is ${run.state}` : `${committed}; no live host drives it: berth resume ${runId} finishes the cancellation`,
    );
    return EXIT.ok;
  }
  await faultHold('cancel.committed');
  if (!ctx.json) process.stderr.write(`${committed}; no live host drives it, so this one carries it out\n`);
  return carryOut(ctx, runId, already, { case: which, claim: null, wait: null });
}

/**
 * Which case a `berth cancel` met, in its JSON (`case`): the run had ended; no live host drove it
 * (this command carried the cancel out); its owner renews its claim (it stops the run now); its
 * owner is alive but has not renewed (`claim` says since when and when the claim expires).
 */
export type CancelCase = 'ended' | 'no_live_host' | 'owner_renews' | 'owner_overdue';

/** What a cancel says of a live owner: it stops the run now, or (overdue) when it can and what else does. */
function ownerLine(committed: string, runId: string, host: HostView, claim: OwnerClaim | null, waiting: boolean): string {
  if (claim?.state !== 'overdue') return `${committed}; host ${host.hostId}${host.pid ? ` (pid ${host.pid})` : ''} drives it and stops it now${waiting ? '; waiting for the run to end' : ''}`;
  return `${committed}; ${overdueLine(host, claim, runId, waiting)}`;
}

function overdueLine(host: HostView, claim: OwnerClaim, runId: string, waiting: boolean): string {
  const expiry = `${new Date(claim.leaseUntil).toISOString()} (in ${duration(claim.expiresInMs)}, store clock)`;
  const then = waiting
    ? `waiting until then to carry the cancel out here (Ctrl-C stops waiting; the cancel stays committed)`
    : `then berth cancel ${runId} again (or berth resume ${runId}) carries the cancel out; berth cancel ${runId} --wait waits for that and does it`;
  return (
    `its owner, host ${host.hostId}${host.pid ? ` (pid ${host.pid})` : ''}, is alive but has not renewed its claim for ${duration(claim.heartbeatAgeMs)} ` +
    `(it renews every ${duration(claim.renewEveryMs)}: frozen or overloaded); it stops the run when it runs again. Its claim expires at ${expiry}; ${then}`
  );
}

/** This host carries the committed cancel out (a resume that ends the run `cancelled`); `said` joins its JSON as `cancel`. */
async function carryOut(ctx: CliContext, runId: string, already: 'cancelled' | 'cancelling' | undefined, said: Record<string, unknown>): Promise<number> {
  const committed = already === 'cancelling' ? `cancel of run ${runId} was committed before` : `cancel of run ${runId} committed`;
  try {
    // The cancel did what it was asked: a run that ends cancelled is this command's success, not a failure to report.
    return await resumeRun(ctx, runId, { endsWell: 'cancelled', json: { cancel: said } });
  } catch (err) {
    // A host claimed the run between the read above and this one's claim (a resume, a worker): it
    // drives the run now and carries the committed cancel out. Reported as refused ("nothing was
    // changed", exit 1), the cancel that had been committed read as one that had not.
    if (!isBerthError(err, 'run_owned')) throw err;
    const o = (err.details as { owner?: { holder: string; pid: number | null } } | undefined)?.owner;
    emit(ctx.json, { runId, requested: true, already: already ?? null, owner: o ? { hostId: o.holder, pid: o.pid, live: true } : null, ...said, case: 'owner_renews' }, () =>
      `${committed}; host ${o?.holder ?? '?'}${o?.pid ? ` (pid ${o.pid})` : ''} took the run meanwhile: it drives it and carries the cancel out`,
    );
    return EXIT.ok;
  }
}

export { drive };
