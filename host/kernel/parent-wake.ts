import type { Task } from '../model';
import type { TaskTransitionInput } from '../store';

/** The transition that wakes a task whose wait on children is over: it re-enters the awaited phase. */
export function wakeFromWait(task: Task): TaskTransitionInput {
  return { taskId: task.id, expectVersion: task.version, set: { status: 'running', phase: task.wait!.phase, wait: null, attempts: 0 } };
}

/**
 * The wake of `child`'s parent, to commit with the child's final decision, when the parent waits
 * for that child alone (a plan's step, an agent turn's one tool call, an MCP call): one commit
 * less per step than a wake of its own once the child is terminal. Undefined otherwise (a wait on
 * several children is judged by the scheduler, which reads them all; a parent being cancelled is
 * wound down by the cancel path). The parent's version guards it like the separate wake: a parent
 * that moved meanwhile refuses the commit, and the caller commits the decision alone.
 */
export async function parentWakeWith(child: Task, read: (taskId: string) => Promise<Task | undefined>): Promise<TaskTransitionInput | undefined> {
  if (!child.parentId) return undefined;
  const parent = await read(child.parentId);
  const wait = parent?.status === 'waiting' ? parent.wait : null;
  if (!parent || !wait || wait.signal !== undefined || parent.cancelRequested) return undefined;
  if (wait.children.length !== 1 || wait.children[0] !== child.id) return undefined;
  return wakeFromWait(parent);
}
