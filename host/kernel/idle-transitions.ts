import { TASK_RESTARTED, type Json, type Run, type RunVersions, type Task } from '../model';
import { newId } from '../support';
import type { CommitInput, EffectWrite, NewEntry } from '../store';
import { cancelRecord } from './cancel-record';
import { wakeFromWait } from './parent-wake';
import { LIVE, rootRunTransitions, type PhaseRunnerDeps } from './phase-runner';

/** What the scheduler's transitions need: the phase runner's deps, and a way to have a task examined again. */
export interface IdleTransitionDeps extends PhaseRunnerDeps {
  /** Versions recorded on run transitions. */
  versions?: RunVersions;
  markDirty(taskId: string): void;
  /** A row read from the store, checked against the kept one. */
  observed?(task: Task): void;
}

type TaskSet = NonNullable<CommitInput['taskTransitions']>[number]['set'];

/** How many times a transition is committed again after its run moved under it. */
const RUN_MOVE_TRIES = 5;

/**
 * One compare-and-set transition of a task the scheduler moves outside a phase. The task is
 * examined again after it; undefined when the commit was refused (the task moved meanwhile).
 */
export async function transition(d: IdleTransitionDeps, task: Task, label: string, set: TaskSet, extra: Partial<CommitInput> | (() => Promise<Partial<CommitInput>>) = {}): Promise<Task | undefined> {
  const build = typeof extra === 'function' ? extra : async () => extra;
  const commit = () => build().then((x) => d.commit({ ...x, sessionId: task.sessionId, label: `${label}:${task.kind}`, taskTransitions: [{ taskId: task.id, expectVersion: task.version, set }] }));
  let r = await commit();
  // Extra built from a read of the run (a function): another task of the run may have moved it
  // between that read and this commit (two sleepers of a run in retry_wait waking at once). The
  // run move is built again from the run as it is now; the task's compare-and-set still guards it.
  for (let again = 0; typeof extra === 'function' && !r.ok && r.conflict.kind === 'run_state' && r.conflict.runId === task.runId && again < RUN_MOVE_TRIES; again++) r = await commit();
  if (!r.ok) {
    d.logger.warn({ taskId: task.id, label, conflict: r.conflict }, 'transition not committed');
    return undefined;
  }
  d.markDirty(task.id);
  return r.tasks?.find((t) => t.id === task.id) ?? d.store.getTask(task.id);
}

/** A pending (or unblocked) task starts running; the root task of an admitted run takes its run to `running` in the same commit. */
export async function startTask(d: IdleTransitionDeps, task: Task, known?: Run): Promise<Task | undefined> {
  const extra: Partial<CommitInput> = {};
  if (task.status === 'pending' && task.runId) {
    // The run examine read a moment ago, when it did (the commit's compare-and-set on its state guards a stale one).
    const run = known?.id === task.runId ? known : await d.store.getRun(task.runId);
    if (run?.rootTaskId === task.id && run.state === 'admitted') {
      extra.runTransitions = [{ runId: run.id, from: 'admitted', to: 'running', actor: `host:${d.hostId}`, reason: 'root task started', versions: d.versions }];
    }
  }
  return transition(d, task, 'task.start', { status: 'running', blockedReason: null }, extra);
}

/** A sleeper whose time came runs again; a task waking while its run waits in `retry_wait` takes the run back to `running`. */
export async function wakeSleeper(d: IdleTransitionDeps, task: Task): Promise<void> {
  if ((task.wakeAt ?? 0) > d.clock.now()) return;
  const extra = async (): Promise<Partial<CommitInput>> => {
    const run = task.runId ? await d.store.getRun(task.runId) : undefined;
    return run?.state === 'retry_wait'
      ? { runTransitions: [{ runId: run.id, from: 'retry_wait', to: 'running', actor: `host:${d.hostId}`, reason: `retry wait ended: task ${task.id} (${task.kind}) runs phase ${task.phase} again` }] }
      : {};
  };
  await transition(d, task, 'task.wake', { status: 'running', wakeAt: null }, extra);
}

/**
 * Delivers an outside signal to a task awaiting it: the task re-enters the awaited phase with
 * `payload` under `checkpoint[signal]`, in one commit with any run transitions the caller adds.
 * False when the task is not waiting for that signal (already delivered, or never asked).
 */
export async function deliverSignal(d: IdleTransitionDeps, taskId: string, signal: string, payload: Json, extra: Pick<CommitInput, 'runTransitions' | 'actor' | 'effects'> = {}): Promise<boolean> {
  const task = await d.store.getTask(taskId);
  if (!task || task.status !== 'waiting' || task.wait?.signal !== signal) return false;
  const base = task.checkpoint !== null && typeof task.checkpoint === 'object' && !Array.isArray(task.checkpoint) ? task.checkpoint : { previous: task.checkpoint };
  const done = await transition(d, task, 'task.signal', { status: 'running', phase: task.wait.phase, wait: null, attempts: 0, checkpoint: { ...base, [signal]: payload } }, extra);
  return done !== undefined;
}

/** A task waiting for its children wakes once they settle (or, fail-fast, once one failed; the rest are cancelled). */
export async function checkWait(d: IdleTransitionDeps, task: Task): Promise<void> {
  const wait = task.wait!;
  if (wait.signal) return;
  // Only the children it waits for, each as this kernel's commits left it or read by id: a plan
  // root waits for one step at a time, and reading all its children made every step cost the run's length.
  const children = await waitedChildren(d, task.id, wait.children);
  const failed = children.some((c) => c.status === 'terminal' && c.outcome !== 'ok');
  const settled = children.every((c) => c.status === 'terminal');
  if (!settled && !(wait.join === 'failFast' && failed)) return;
  const cancel = children.filter((c) => c.status !== 'terminal' && !c.cancelRequested).map((c) => c.id);
  await transition(d, task, 'task.wake', wakeFromWait(task).set, { cancelTasks: cancel });
}

/** The waited-for children, in the order the wait names them; a row that is not there is not waited for (as before: only existing children of this parent count). */
async function waitedChildren(d: IdleTransitionDeps, parentId: string, ids: string[]): Promise<Task[]> {
  // A wait on many children (an agent turn's tool calls) reads them in one query, as before.
  if (ids.length > 8) return (await d.store.listTasks({ parentId })).filter((c) => ids.includes(c.id));
  const rows = await Promise.all(ids.map(async (id) => d.knownTask?.(id) ?? (await d.store.getTask(id))));
  return rows.filter((c): c is Task => c !== undefined && c.parentId === parentId);
}

/** A `completing` task asks its live children to cancel and turns terminal once none is left. */
export async function checkCompleting(d: IdleTransitionDeps, task: Task): Promise<void> {
  const live = await d.store.listTasks({ parentId: task.id, statuses: LIVE });
  const ask = live.filter((c) => !c.cancelRequested).map((c) => c.id);
  if (live.length > 0) {
    if (ask.length) await d.commit({ sessionId: task.sessionId, label: 'task.cancel-children', cancelTasks: ask });
    return;
  }
  if (task.outcome !== 'cancelled') return finish(d, task, 'task.settled', {});
  // Its children have settled since the cancel was recorded: what they did is part of where its work stopped.
  const record = await cancelRecord(d.store, task, [], d.registry.find(task.kind, task.kindVersion));
  await finish(d, task, 'task.settled', { result: record.result }, record.effects);
}

/**
 * A cancelled task that is not executing: children first, then terminal `cancelled`, recording
 * where its effects stood (an action a dead host left in flight becomes `unknown`), as a
 * cancel that stops a running phase does.
 */
export async function cancelIdle(d: IdleTransitionDeps, task: Task): Promise<void> {
  const handler = d.registry.find(task.kind, task.kindVersion);
  if (task.status === 'running' && handler?.stopAbandoned) {
    try {
      await handler.stopAbandoned(task, { store: d.store, signal: new AbortController().signal, log: d.logger.child({ taskId: task.id, kind: task.kind }) });
    } catch (err) {
      d.logger.warn({ taskId: task.id, err }, 'could not stop what the task left running; the cancel waits');
      return;
    }
  }
  const live = await d.store.listTasks({ parentId: task.id, statuses: LIVE });
  const record = await cancelRecord(d.store, task, [], handler);
  const entries = handler?.cancelEntries ? await handler.cancelEntries(task, { store: d.store }) : [];
  const set = { outcome: 'cancelled' as const, result: record.result, wait: null, wakeAt: null };
  if (live.length > 0) {
    await transition(d, task, 'task.cancel', { ...set, status: 'completing' }, { cancelTasks: live.filter((c) => !c.cancelRequested).map((c) => c.id), effects: record.effects, entries });
    return;
  }
  await finish(d, task, 'task.cancelled', set, record.effects, entries);
}

/**
 * A task a dead host left `running` counts a restart; past its handler's limit it ends in
 * `restart_limit` (its live children cancelled first). True when it re-enters its saved phase.
 */
export async function countRestart(d: IdleTransitionDeps, task: Task): Promise<boolean> {
  const handler = d.registry.find(task.kind, task.kindVersion);
  const restarts = task.restarts + 1;
  const limit = handler?.restartLimit ?? 5;
  if (restarts > limit) {
    const error = { code: 'restart_limit', message: `task died ${restarts} times in phase ${task.phase} (limit ${limit})` };
    const live = await d.store.listTasks({ parentId: task.id, statuses: LIVE });
    if (live.length) await transition(d, task, 'task.restart-limit', { restarts, status: 'completing', outcome: 'error', error, result: null }, { cancelTasks: live.map((c) => c.id) });
    else await finish(d, task, 'task.restart-limit', { restarts, outcome: 'error', error, result: null });
    return false;
  }
  // An entry of the run, so its record accounts for the kill: which task was taken up again, where, how many times.
  const entry: NewEntry = { id: newId('ent'), runId: task.runId, taskId: task.id, kind: TASK_RESTARTED, body: { taskId: task.id, kind: task.kind, phase: task.phase, restarts } };
  return (await transition(d, task, 'task.restart', { restarts }, { entries: [entry] })) !== undefined;
}

/** Terminal transition outside a phase (settled completing, idle cancel, restart limit). */
async function finish(d: IdleTransitionDeps, task: Task, label: string, set: TaskSet, effects: EffectWrite[] = [], entries: NewEntry[] = []): Promise<void> {
  const outcome = set.outcome ?? task.outcome ?? 'error';
  const detail = set.error ? `${set.error.code}: ${set.error.message}` : '';
  const runTransitions = await rootRunTransitions(d, { ...task, outcome }, outcome, effects, detail);
  const done = await transition(d, task, label, { ...set, status: 'terminal' }, { runTransitions, effects, entries });
  if (done?.parentId) d.markDirty(done.parentId);
}

/**
 * An operator's delivery to a run another live host owns (`berth reconcile` while a worker holds
 * the parked run): one compare-and-set commit without a fence, like an approval, which moves the
 * waiting task on; the owner's scheduler finds it at its next poll and runs the phase. False when
 * the task is not waiting for that signal.
 */
export function deliverAsOperator(d: Pick<IdleTransitionDeps, 'store' | 'logger'>, taskId: string, signal: string, payload: Json, extra: Pick<CommitInput, 'runTransitions' | 'actor' | 'effects'> = {}): Promise<boolean> {
  const deps = { ...d, commit: (input: CommitInput) => d.store.commit(input), markDirty: () => {} } as unknown as IdleTransitionDeps;
  return deliverSignal(deps, taskId, signal, payload, extra);
}
