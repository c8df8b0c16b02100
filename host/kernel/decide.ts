import type { Json, Task, TaskError, TaskOutcome } from '../model';
import type { NewTask, TaskChanges } from '../store';
import type { Decision } from './handler';

/** A spawn spec with its handler resolved, ready to become a row. */
export interface ResolvedSpawn {
  id: string;
  kind: string;
  version: number;
  phase: string;
  input: Json;
  /** Set when the spawn begins past the initial phase (SpawnSpec.begin): created `running` with it. */
  checkpoint?: Json;
}

export interface DecisionEffect {
  set: TaskChanges;
  newTasks: NewTask[];
  /** Owned subtasks asked to stop because the task's result is decided. */
  cancel: string[];
  /** Set when the task leaves `running` for `terminal` in this commit (not via `completing`). */
  terminal: TaskOutcome | null;
}

/**
 * Maps a phase decision to the task's new row, pure. A task that decides its result while owned
 * subtasks still run goes to `completing` and asks them to stop; it becomes terminal when they settle.
 * A cancel request turns any non-final decision into `cancelled`.
 */
export function applyDecision(task: Task, decision: Decision, spawns: ResolvedSpawn[], liveChildren: string[]): DecisionEffect {
  const none = { newTasks: [], cancel: [], terminal: null };
  if (task.cancelRequested && !isFinal(decision)) {
    return finish(task, 'cancelled', null, null, liveChildren);
  }
  switch (decision.type) {
    case 'next':
      return { ...none, set: { status: 'running', phase: decision.phase, checkpoint: cp(task, decision.checkpoint), attempts: 0 } };
    case 'sleep':
      return {
        ...none,
        set: { status: 'sleeping', phase: decision.phase, wakeAt: decision.until, checkpoint: cp(task, decision.checkpoint) },
      };
    case 'spawn': {
      const newTasks = spawns.map(
        (s): NewTask => ({
          id: s.id,
          runId: task.runId,
          parentId: task.id,
          kind: s.kind,
          kindVersion: s.version,
          phase: s.phase,
          input: s.input,
          ...(s.checkpoint === undefined ? {} : { checkpoint: s.checkpoint, status: 'running' as const }),
        }),
      );
      return {
        ...none,
        newTasks,
        set: {
          status: 'waiting',
          wait: { join: decision.join, children: spawns.map((s) => s.id), phase: decision.phase },
          checkpoint: cp(task, decision.checkpoint),
          attempts: 0,
        },
      };
    }
    case 'await':
      return {
        ...none,
        set: {
          status: 'waiting',
          wait: { join: 'allSettled', children: [], phase: decision.phase, signal: decision.signal },
          checkpoint: cp(task, decision.checkpoint),
          attempts: 0,
        },
      };
    case 'complete':
      return finish(task, 'ok', decision.result ?? null, null, liveChildren);
    case 'fail':
      return finish(task, 'error', null, decision.error, liveChildren);
    case 'interrupt':
      return finish(task, 'interrupted', decision.result ?? { reason: decision.reason }, null, liveChildren);
  }
}

function finish(task: Task, outcome: TaskOutcome, result: Json, error: TaskError | null, liveChildren: string[]): DecisionEffect {
  const waitsForChildren = liveChildren.length > 0;
  return {
    set: {
      status: waitsForChildren ? 'completing' : 'terminal',
      outcome,
      result,
      error,
      wait: null,
      wakeAt: null,
    },
    newTasks: [],
    cancel: liveChildren,
    terminal: waitsForChildren ? null : outcome,
  };
}

const isFinal = (d: Decision) => d.type === 'complete' || d.type === 'fail' || d.type === 'interrupt';
const cp = (task: Task, checkpoint: Json | undefined): Json => (checkpoint === undefined ? task.checkpoint : checkpoint);

/** Columns of a decision's row that are plain values (compared as they are). */
const SCALARS = ['status', 'phase', 'attempts', 'wakeAt', 'outcome', 'blockedReason'] as const;

/**
 * `set` without the plain fields that already hold the value it sets on `task`. The commit is a
 * compare-and-set on the version `task` was read at, so those columns hold exactly `task`'s values
 * and the row written is the same; naming `status` anyway made SQLite rewrite the task's entry
 * in the status index on every step (a WAL page per commit of a phase that stays `running`).
 */
export function changedOnly(task: Task, set: TaskChanges): TaskChanges {
  let out: TaskChanges | undefined;
  for (const k of SCALARS) {
    if (k in set && set[k] === task[k]) {
      out ??= { ...set };
      delete out[k];
    }
  }
  return out ?? set;
}
