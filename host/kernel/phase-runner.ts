import type { Logger } from 'pino';
import { BerthError, isBerthError } from '../errors';
import { isLegalRunTransition, isUnresolvedEffect, type Json, type RunState, type Task } from '../model';
import { pagesOf, type CommitInput, type CommitResult, type EffectWrite, type Store } from '../store';
import type { Clock } from '../support/clock';
import { newId } from '../support/ids';
import { applyDecision, changedOnly, type ResolvedSpawn } from './decide';
import type { DocumentTypes } from './documents';
import { cancelRecord } from './cancel-record';
import { performEffect } from './effects';
import { parentWakeWith } from './parent-wake';
import type { Decision, PhaseContext, SpawnSpec, TaskHandler } from './handler';
import type { HandlerRegistry } from './registry';
import { runTransitionsForRoot } from './run-outcome';

export interface PhaseRunnerDeps {
  store: Store;
  registry: HandlerRegistry;
  documents: DocumentTypes;
  clock: Clock;
  logger: Logger;
  hostId: string;
  commit: (input: CommitInput) => Promise<CommitResult>;
  /**
   * Told the snapshot records of a decision that will never commit (the host stopping, the run
   * lost, a refused commit): their images are named by ids no record will ever hold.
   */
  discardSnapshots?: (snapshotIds: string[]) => Promise<void>;
  /** The row this kernel's own commits left, while it holds (see SessionRows); undefined: read the store. */
  knownTask?(taskId: string): Task | undefined;
}

/** Every status but `terminal`: the children a finishing task still has to wind down (read by index). */
export const LIVE: Task['status'][] = ['pending', 'running', 'waiting', 'sleeping', 'completing'];

/** How one phase execution ended, for the scheduler. */
export type PhaseEnd = { committed: true; task: Task; terminal: boolean } | { committed: false; reason: string };

/**
 * Runs the saved phase of one task and commits its decision, together with the entries, document
 * operations and effect receipts it produced, in one commit. Exceptions from a phase become a
 * retry (retryable errors, with backoff kept in the task) or a failure; they never escape.
 */
export async function runPhase(
  d: PhaseRunnerDeps,
  task: Task,
  handler: TaskHandler,
  opts: { signal: AbortSignal; recovered: boolean; stopping: () => boolean; park?: (parked: boolean) => void },
): Promise<PhaseEnd> {
  const settled: Array<(committed: boolean) => void> = [];
  // Whether the decision being committed is the one the phase returned (not a retry, failure or
  // cancel put in its place): only then did its writes reach the store.
  const own = { decision: false };
  let end: PhaseEnd | undefined;
  try {
    end = await runOnce(d, task, handler, opts, settled, own);
    return end;
  } finally {
    const committed = end?.committed === true && own.decision;
    for (const fn of settled) {
      try {
        fn(committed);
      } catch (err) {
        d.logger.error({ taskId: task.id, err }, 'a phase\'s settle callback threw');
      }
    }
  }
}

async function runOnce(
  d: PhaseRunnerDeps,
  task: Task,
  handler: TaskHandler,
  opts: { signal: AbortSignal; recovered: boolean; stopping: () => boolean; park?: (parked: boolean) => void },
  settled: Array<(committed: boolean) => void>,
  own: { decision: boolean },
): Promise<PhaseEnd> {
  // Built when first used: a child logger serialises its bindings, and most phases log nothing.
  let child: Logger | undefined;
  const log = () => (child ??= d.logger.child({ runId: task.runId, taskId: task.id, kind: task.kind, phase: task.phase }));
  const pending: EffectWrite[] = [];
  const maxRetries = handler.maxRetries ?? 3;
  const ctx: PhaseContext = {
    task,
    // Read when a phase reads it (a kind that keeps its parsed input never does again).
    get input() {
      return task.input;
    },
    checkpoint: task.checkpoint,
    signal: opts.signal,
    recovered: opts.recovered,
    store: d.store,
    get log() {
      return log();
    },
    now: () => d.clock.now(),
    children: (opts) => d.store.listTasks({ parentId: task.id, ...(opts?.newest !== undefined ? { newest: opts.newest } : {}), ...(opts?.page ? { page: opts.page } : {}) }),
    readDocument: async <T extends Json>(id: string) => {
      const doc = await d.store.getDocument(id);
      return doc ? { state: d.documents.rebuild(doc) as T, version: doc.version } : undefined;
    },
    perform: (spec, action) =>
      performEffect(
        { store: d.store, commit: d.commit, sessionId: task.sessionId, runId: task.runId, taskId: task.id, taskKind: task.kind, taskVersion: task.version, signal: opts.signal, log: log(), pending, retriesLeft: task.attempts < maxRetries },
        spec,
        action,
      ),
    idle: async (waiting) => {
      opts.park?.(true);
      try {
        return await waiting;
      } finally {
        opts.park?.(false);
      }
    },
    onSettled: (fn) => void settled.push(fn),
  };
  const phase = handler.phases[task.phase];
  let decision: Decision;
  let retry = false;
  try {
    if (!phase) throw new BerthError('phase_unknown', `handler ${handler.kind}@${handler.version} has no phase ${task.phase}`);
    decision = await phase(ctx);
    own.decision = true;
  } catch (err) {
    if (opts.stopping()) {
      await settleUnstarted(d, task, pending, log());
      return { committed: false, reason: 'host stopping' };
    }
    if (isBerthError(err, 'ownership_lost')) return { committed: false, reason: err.message };
    const e = isBerthError(err) ? err : null;
    const message = err instanceof Error ? err.message : String(err);
    retry = Boolean(e?.retryable) && task.attempts < maxRetries;
    const waitMs = 100 * 2 ** task.attempts;
    // An action that was not applied, or whose outcome is being checked again, waits visibly: the run is in retry_wait.
    const run = retry && e?.details?.retryWait ? { to: 'retry_wait' as const, reason: `${message}; retry ${task.attempts + 1} of ${maxRetries} in ${waitMs / 1000}s` } : undefined;
    decision = retry
      ? { type: 'sleep', until: d.clock.now() + waitMs, phase: task.phase, ...(run ? { run } : {}) }
      : { type: 'fail', error: { code: e?.code ?? 'phase_threw', message } };
    log().warn({ err: message, stack: err instanceof Error ? err.stack : undefined, retry }, 'phase threw');
  }
  // A host that is shutting down leaves the task `running`: recovery re-enters this phase.
  if (opts.stopping()) {
    await settleUnstarted(d, task, pending, log());
    return dropped(d, decision, 'host stopping');
  }
  // Cancelled mid-phase (the cancel commit does not move the task's version): whatever the phase
  // threw because of it, the task ends `cancelled`, recording where its effects stood.
  if (opts.signal.aborted && decision.type !== 'complete' && (await d.store.getTask(task.id))?.cancelRequested) {
    task = { ...task, cancelRequested: true };
    retry = false;
    own.decision = false;
    decision = { type: 'next', phase: task.phase };
  }

  let built: DecisionCommit;
  try {
    built = await decisionCommit(d, task, decision, pending);
  } catch (err) {
    // An invalid document write or an unknown subtask kind is the phase's bug: the task fails, naming it.
    const e = isBerthError(err) ? err : null;
    retry = false;
    own.decision = false;
    decision = { type: 'fail', error: { code: e?.code ?? 'decision_invalid', message: err instanceof Error ? err.message : String(err) } };
    built = await decisionCommit(d, task, decision, pending);
  }
  const commit = built.input;
  if (retry) commit.taskTransitions![0]!.set.attempts = task.attempts + 1;
  let wake = commit.taskTransitions![0]!.set.status === 'terminal' ? await parentWakeWith(task, async (id) => d.knownTask?.(id) ?? (await d.store.getTask(id))) : undefined;
  if (wake) commit.taskTransitions!.push(wake);
  const send = async (): Promise<CommitResult> => {
    const r = await d.commit(commit);
    // The parent moved since it was read (cancelled, or woken by another path): the decision is
    // committed alone, and the scheduler judges the parent's wait as it did before the wake joined.
    if (r.ok || !wake || r.conflict.kind !== 'task_version' || r.conflict.taskId !== wake.taskId) return r;
    commit.taskTransitions!.pop();
    wake = undefined;
    return d.commit(commit);
  };
  let result = await send();
  // The run moves were built from the run as read before the commit; another task of the run may
  // have moved it since (two phases asking for retry_wait at once: the second read `running` while
  // the first's commit was on its way). That refusal is about the run, not this task: refusing the
  // decision would drop what the phase proved (an action not applied goes back to `intended`) and
  // re-run it from a row whose effect still says `executing`, as if the action might have arrived.
  // The moves are built again from the run as it is now; the task's own compare-and-set still guards the rest.
  for (let again = 0; !result.ok && result.conflict.kind === 'run_state' && result.conflict.runId === task.runId && again < RUN_MOVE_TRIES; again++) {
    commit.runTransitions = await built.runMoves();
    result = await send();
  }
  if (!result.ok) {
    log().warn({ conflict: result.conflict }, 'decision not committed');
    // A refused commit wrote nothing (a commit that threw may have landed: it keeps its images).
    return dropped(d, decision, result.conflict.kind);
  }
  // The commit answers the row it wrote: exact, with no read.
  const after = result.tasks?.find((t) => t.id === task.id) ?? (await d.store.getTask(task.id))!;
  return { committed: true, task: after, terminal: after.status === 'terminal' };
}

/**
 * What a stopping host still commits of the phase it drops: attempts the action itself proved were
 * never started (a command cancelled before the sandbox got it). Left `executing`, a `never` step's
 * attempt would be judged in flight after the restart and wait for an operator. Only the effect
 * rows move, under the task's version: the phase itself is re-entered by recovery as before.
 */
async function settleUnstarted(d: PhaseRunnerDeps, task: Task, pending: readonly EffectWrite[], log: Logger): Promise<void> {
  const unsent = pending.filter((p) => p.expectStatus === 'executing' && p.set?.status === 'failed' && (p.set.error as { delivery?: unknown } | undefined)?.delivery === 'not_sent');
  if (unsent.length === 0) return;
  const r = await d.commit({ sessionId: task.sessionId, label: `effect.unstarted:${task.kind}`, expectTasks: [{ taskId: task.id, version: task.version }], effects: unsent }).catch((err: unknown) => {
    log.warn({ err, effectIds: unsent.map((p) => p.id) }, 'could not record actions that never started; recovery judges them in flight');
    return undefined;
  });
  if (r && !r.ok) log.warn({ conflict: r.conflict }, 'actions that never started not recorded');
}

/** A decision that will not commit: the images of its snapshots go now, not at the next gc. */
async function dropped(d: PhaseRunnerDeps, decision: Decision, reason: string): Promise<PhaseEnd> {
  const ids = (decision.writes?.snapshots ?? []).map((s) => s.id);
  if (ids.length && d.discardSnapshots) await d.discardSnapshots(ids).catch((err: unknown) => d.logger.warn({ err, snapshotIds: ids }, 'could not discard the images of uncommitted snapshots; gc will'));
  return { committed: false, reason };
}

/** How many times a decision is committed again after its run moved under it (each time it read the run anew). */
const RUN_MOVE_TRIES = 5;
/** Effects per read when a root's final commit looks for the run's unresolved ones. */
const EFFECT_PAGE = 500;

/** A decision's commit, and how to build its run moves again from the run as it is now. */
interface DecisionCommit {
  input: CommitInput;
  runMoves(): Promise<NonNullable<CommitInput['runTransitions']>>;
}

async function decisionCommit(
  d: PhaseRunnerDeps,
  task: Task,
  decision: Decision,
  pending: EffectWrite[],
): Promise<DecisionCommit> {
  const spawns: ResolvedSpawn[] = decision.type === 'spawn' ? decision.tasks.map((s) => resolveSpawn(d.registry, s)) : [];
  const final = decision.type === 'complete' || decision.type === 'fail' || decision.type === 'interrupt' || task.cancelRequested;
  const live = final ? (await d.store.listTasks({ parentId: task.id, statuses: LIVE })).map((t) => t.id) : [];
  const effect = applyDecision(task, decision, spawns, live);
  const writes = decision.writes ?? {};
  const effects: EffectWrite[] = [
    ...(writes.effects ?? []).map((e) => ({ id: e.id, create: { runId: task.runId, taskId: task.id, kind: e.kind, intent: e.intent, replay: e.replay } })),
    ...(decision.type === 'spawn' ? decision.tasks : []).flatMap((s) => (s.begin?.effects ?? []).map((e) => ({ id: e.id, create: { runId: task.runId, taskId: s.begin!.id, kind: e.kind, intent: e.intent, replay: e.replay } }))),
    ...pending,
  ];
  if (effect.set.outcome === 'cancelled') {
    const record = await cancelRecord(d.store, task, effects, d.registry.find(task.kind, task.kindVersion));
    effect.set.result = record.result;
    for (const w of record.effects) {
      const i = effects.findIndex((e) => e.id === w.id && !e.create);
      if (i >= 0) effects[i] = w;
      else effects.push(w);
    }
  }
  const terminal = effect.terminal;
  const move = (decision.type === 'await' || decision.type === 'next' || decision.type === 'sleep') && decision.run ? decision.run : undefined;
  const runMoves = async () =>
    terminal ? await rootRunTransitions(d, task, terminal, effects, describe(decision)) : move ? await requestedRunTransitions(d, task, move) : [];
  const input: CommitInput = {
    sessionId: task.sessionId,
    label: `phase.${decision.type}:${task.kind}`,
    entries: (writes.entries ?? []).map((e) => ({ id: newId('ent'), conversationId: e.conversationId ?? null, runId: task.runId, taskId: task.id, kind: e.kind, body: e.body })),
    documentOps: await d.documents.toOps(writes.documents ?? [], task.runId, (id) => d.store.getDocument(id)),
    tasks: effect.newTasks,
    taskTransitions: [{ taskId: task.id, expectVersion: task.version, set: changedOnly(task, effect.set) }],
    cancelTasks: effect.cancel,
    effects,
    snapshots: (writes.snapshots ?? []).map((s) => ({ ...s, runId: task.runId, taskId: task.id })),
    acceptance: task.runId ? (writes.acceptance ?? []).map((a) => ({ ...a, runId: task.runId! })) : [],
    artifacts: (writes.artifacts ?? []).map((a) => ({ ...a, runId: task.runId!, taskId: task.id })),
    runTransitions: await runMoves(),
  };
  return { input, runMoves };
}

/** Run transitions when `task` is its run's root and has just become terminal. */
export async function rootRunTransitions(
  d: Pick<PhaseRunnerDeps, 'store' | 'hostId'>,
  task: Task,
  outcome: NonNullable<Task['outcome']>,
  effectsInCommit: EffectWrite[],
  detail: string,
) {
  if (!task.runId) return [];
  const run = await d.store.getRun(task.runId);
  if (!run || run.rootTaskId !== task.id) return [];
  const after = new Map(effectsInCommit.filter((e) => e.set?.status).map((e) => [e.id, e.set!.status!]));
  // Page by page, ids only: a 3,000-step run's effects read whole were ~10 MB of its end's peak.
  const unresolved: string[] = [];
  for await (const page of pagesOf((p) => d.store.listEffects({ runId: run.id, page: p }), EFFECT_PAGE)) {
    for (const e of page) if (isUnresolvedEffect(after.get(e.id) ?? e.status)) unresolved.push(e.id);
  }
  for (const e of effectsInCommit) if (e.create && !after.has(e.id) && !unresolved.includes(e.id)) unresolved.push(e.id);
  return runTransitionsForRoot(run, outcome, unresolved, `host:${d.hostId}`, detail);
}

/** The run move a decision asks for, when it is a legal edge from where the run is now. */
async function requestedRunTransitions(d: Pick<PhaseRunnerDeps, 'store' | 'hostId'>, task: Task, move: { to: RunState; reason: string }) {
  if (!task.runId) return [];
  const run = await d.store.getRun(task.runId);
  if (!run || run.state === move.to || !isLegalRunTransition(run.state, move.to)) return [];
  return [{ runId: run.id, from: run.state, to: move.to, actor: `host:${d.hostId}`, reason: move.reason }];
}

function resolveSpawn(registry: HandlerRegistry, s: SpawnSpec): ResolvedSpawn {
  const handler = s.version === undefined ? registry.newest(s.kind) : registry.find(s.kind, s.version);
  if (!handler) throw new BerthError('handler_unknown', `cannot spawn ${s.kind}${s.version === undefined ? '' : `@${s.version}`}: no handler registered`);
  if (!s.begin) return { id: newId('task'), kind: s.kind, version: s.version ?? handler.version, phase: handler.initialPhase, input: s.input };
  if (!handler.phases[s.begin.phase]) throw new BerthError('phase_unknown', `cannot spawn ${s.kind}@${handler.version} in phase ${s.begin.phase}: the handler has no such phase`);
  return { id: s.begin.id, kind: s.kind, version: s.version ?? handler.version, phase: s.begin.phase, input: s.input, checkpoint: s.begin.checkpoint };
}

function describe(decision: Decision): string {
  if (decision.type === 'fail') return `${decision.error.code}: ${decision.error.message}`;
  if (decision.type === 'interrupt') return decision.reason;
  if (decision.type === 'await') return decision.run?.reason ?? '';
  return '';
}
