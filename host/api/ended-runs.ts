import { BerthError } from '../errors';
import { isFinalRunState, type Run, type Task } from '../model';
import type { Store } from '../store';
import { ownerOf } from './decisions';
import { assertKindsKnown, startHost, takeRun } from './drive';
import type { RuntimeParts } from './runtime';
import { LIVE, tasksSettled } from './tasks-settled';

/** Runs in a final state that still have a live task: a host that was to settle them was killed first. */
export async function endedRunsWithLiveTasks(store: Pick<Store, 'listTasks' | 'getRun' | 'getImportedRun'>): Promise<Run[]> {
  const runIds = [...new Set((await store.listTasks({ statuses: LIVE })).map((t) => t.runId).filter((id): id is string => id !== null))];
  const ended: Run[] = [];
  for (const runId of runIds) {
    const run = await store.getRun(runId);
    // An imported run is another store's record: nothing here drives it.
    if (run && isFinalRunState(run.state) && !(await store.getImportedRun(runId))) ended.push(run);
  }
  return ended;
}

/** One task a stopped host left live in an ended run, as it was before a resume and as it is after. */
export interface LeftoverTask {
  id: string;
  kind: string;
  /** Its status when the resume found it. */
  was: Task['status'];
  status: Task['status'];
  outcome: Task['outcome'];
}

/** What a resume of an ended run did with the tasks a stopped host left live in it (null: it had none). */
export interface LeftoversSettled {
  tasks: LeftoverTask[];
  /** Every one of them is terminal now. */
  settled: boolean;
}

/** The live tasks of an ended run (a host killed right after `reconcile --fail` committed); none for a run that has not ended. */
export async function leftoverTasks(store: Pick<Store, 'listTasks'>, run: Pick<Run, 'id' | 'state'>): Promise<Task[]> {
  return isFinalRunState(run.state) ? store.listTasks({ runId: run.id, statuses: LIVE }) : [];
}

/** What became of `before` (the leftovers a resume found): read again once the resume settled the run. */
export async function leftoversAfter(store: Pick<Store, 'getTask'>, before: Task[]): Promise<LeftoversSettled | null> {
  if (!before.length) return null;
  const tasks: LeftoverTask[] = [];
  for (const t of before) {
    const now = (await store.getTask(t.id)) ?? t;
    tasks.push({ id: t.id, kind: t.kind, was: t.status, status: now.status, outcome: now.outcome });
  }
  return { tasks, settled: tasks.every((t) => t.status === 'terminal') };
}

/** "1 task" / "2 tasks". */
export const tasksWord = (n: number) => `${n} task${n === 1 ? '' : 's'}`;

/** One line for the operator: what a resume did with an ended run's leftovers. */
export function leftoversLine(runId: string, l: LeftoversSettled): string {
  const all = `${tasksWord(l.tasks.length)} a stopped host left live in ended run ${runId}`;
  if (l.settled) return `settled the ${all}: ${l.tasks.map((t) => `${t.id} (${t.outcome ?? t.status})`).join(', ')}`;
  const live = l.tasks.filter((t) => t.status !== 'terminal');
  return `${live.length} of the ${all} did not settle: ${live.map((t) => `${t.id} (${t.kind}, ${t.status})`).join(', ')}; berth resume ${runId} carries out the rest`;
}

/** What {@link settleEndedRuns} did: the runs whose tasks it settled, and those it left (with why). */
export interface EndedRunsSettled {
  settled: string[];
  /** `unfinishedRunId`: the session's unfinished run whose host would settle this one (gc does not drive it). */
  left: Array<{ runId: string; reason: string; unfinishedRunId?: string | null }>;
}

/** Why an ended run's tasks are left while its session holds an unfinished run, and the two commands that settle them. */
export function unfinishedRunReason(otherRunId: string | null): string {
  if (!otherRunId) return 'its session has a live task of no run, which gc does not drive';
  return `its session has unfinished run ${otherRunId}, which gc does not drive (that would carry on its work): berth resume ${otherRunId} continues it, berth cancel ${otherRunId} stops it; either settles this run's tasks too`;
}

/**
 * Another run of `run`'s session with a live task, that is not an ended run (or a live task of no
 * run): a host that takes the session drives it too.
 */
export async function unfinishedInSession(store: Pick<Store, 'listTasks' | 'getRun'>, run: Pick<Run, 'id' | 'sessionId'>): Promise<{ runId: string | null } | undefined> {
  for (const t of await store.listTasks({ sessionId: run.sessionId, statuses: LIVE })) {
    if (t.runId === run.id) continue;
    if (t.runId === null) return { runId: null };
    const other = await store.getRun(t.runId);
    if (other && !isFinalRunState(other.state)) return { runId: other.id };
  }
  return undefined;
}

/**
 * `berth gc`: finishes what a host killed right after ending a run left undone (the root task of a
 * run `reconcile --fail` ended, still `waiting`): this host takes each such run whose owner is
 * gone and lets its kernel carry out the recorded cancel, as `berth resume` would. A run a live
 * host owns is that host's to settle; one with tasks of a kind this host has no handler for is
 * named and left. Their sandboxes are released afterwards with every ended run's.
 */
export async function settleEndedRuns(p: RuntimeParts): Promise<EndedRunsSettled> {
  const out: EndedRunsSettled = { settled: [], left: [] };
  const ended = await endedRunsWithLiveTasks(p.store);
  if (!ended.length) return out;
  const endedIds = new Set(ended.map((r) => r.id));
  const { rt } = await startHost(p);
  try {
    for (const run of ended) {
      const owner = await ownerOf(p, run);
      if (owner?.live) {
        out.left.push({ runId: run.id, reason: `host ${owner.hostId} drives it and settles its tasks` });
        continue;
      }
      // Taking the session drives every task of it: never a later run of an agent session that
      // nobody resumed (gc would carry on that run's work: model calls, commands, a recovery
      // deciding its call in flight). The operator chooses: continue it or stop it; the host that
      // does either owns this run's tasks too and settles them before it stops (drive.ts).
      const other = (await p.store.listTasks({ sessionId: run.sessionId, statuses: LIVE })).find((t) => t.runId === null || !endedIds.has(t.runId));
      if (other) {
        out.left.push({ runId: run.id, reason: unfinishedRunReason(other.runId), unfinishedRunId: other.runId });
        continue;
      }
      try {
        await assertKindsKnown(p, rt, run);
        await takeRun(p, rt, run);
      } catch (err) {
        if (!(err instanceof BerthError)) throw err;
        out.left.push({ runId: run.id, reason: `${err.code}: ${err.message}` });
        // A refused claim (another host took the run meanwhile) stops this kernel: the rest is the next gc's.
        if (err.code === 'run_owned') break;
        continue;
      }
      if (await tasksSettled(p.store, rt.kernel, run.id)) out.settled.push(run.id);
      else out.left.push({ runId: run.id, reason: `its tasks did not settle in time; berth resume ${run.id} carries out the rest` });
    }
  } finally {
    await rt.kernel.stop();
  }
  return out;
}
