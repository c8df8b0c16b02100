import { storedValue } from '../kernel';
import { isFinalRunState, OPEN_RUN_STATES, type Run } from '../model';
import { PlanRunInputSchema, type PlanRunInput } from '../plan';
import type { Store } from '../store';
import { runNotFound } from '../store/missing-run';

/** Where a run was forked from, as its root task's input records it (null for a run that is not a fork). */
export interface ForkedFrom {
  runId: string;
  snapshotId: string;
  checkpoint: string;
  /** The first step the fork ran itself. */
  index: number;
}

/** A plan run's input as its root task stored it (undefined for other kinds). */
export async function planInputOf(store: Store, run: Run): Promise<PlanRunInput | undefined> {
  if (run.kind !== 'plan' || !run.rootTaskId) return undefined;
  const root = await store.getTask(run.rootTaskId);
  return root ? storedValue(PlanRunInputSchema, root.input, { what: 'input', kind: root.kind, taskId: root.id }) : undefined;
}

/**
 * Only the `fork` field of a plan run's input: retention asks every open run for its fork point at
 * each of its passes (every 48 commits), and validating the whole input parsed a long plan's every
 * step each time (bench/RESULTS.md, session 20). Unknown keys are skipped, not walked.
 */
const PlanForkSchema = PlanRunInputSchema.pick({ fork: true });

/** The parent and checkpoint of a forked run. */
export async function forkedFrom(store: Store, run: Run): Promise<ForkedFrom | null> {
  if (run.kind === 'agent') {
    // A forked session's first run is the fork; its later runs continue that session.
    const session = await store.getSession(run.sessionId);
    const from = (session?.meta as { forkedFrom?: ForkedFrom } | null | undefined)?.forkedFrom;
    if (!from) return null;
    const first = (await store.listRuns({ sessionId: run.sessionId })).find((r) => r.kind === 'agent');
    return first?.id === run.id ? from : null;
  }
  if (run.kind !== 'plan' || !run.rootTaskId) return null;
  const root = await store.getTask(run.rootTaskId);
  return (root ? storedValue(PlanForkSchema, root.input, { what: 'input', kind: root.kind, taskId: root.id }).fork : undefined) ?? null;
}

/** A run and its forks, recursively, in creation order. */
export interface LineageNode {
  run: Run;
  forkedFrom: ForkedFrom | null;
  children: LineageNode[];
}

/**
 * The lineage a run belongs to, from its oldest ancestor down: up through each run's own record of
 * its parent, down through the store's index of forks (`listForks`), so the cost follows the size
 * of the lineage, not of the store. `parents` holds the fork point of every forked run in it.
 */
export async function lineageOf(store: Store, runId: string): Promise<{ root: LineageNode; parents: Map<string, ForkedFrom> }> {
  let top = await store.getRun(runId);
  if (!top) throw await runNotFound(store, runId);
  const parents = new Map<string, ForkedFrom>();
  // A parent this store does not hold (an imported fork) ends the walk: the fork is the top.
  const seen = new Set<string>([top.id]);
  for (;;) {
    const from = await forkedFrom(store, top);
    if (from) parents.set(top.id, from);
    const parent = from && !seen.has(from.runId) ? await store.getRun(from.runId) : undefined;
    if (!parent) break;
    seen.add(parent.id);
    top = parent;
  }
  const built = new Set<string>();
  const build = async (run: Run): Promise<LineageNode> => {
    built.add(run.id);
    const children: LineageNode[] = [];
    for (const f of await store.listForks(run.id)) {
      if (built.has(f.id)) continue;
      const from = parents.get(f.id) ?? (await forkedFrom(store, f));
      if (from) parents.set(f.id, from);
      children.push(await build(f));
    }
    return { run, forkedFrom: parents.get(run.id) ?? null, children };
  };
  return { root: await build(top), parents };
}

/** The runs forked directly from `runId`, in creation order: one indexed lookup (the submit records each fork's parent). */
export async function forksOf(store: Store, runId: string): Promise<Run[]> {
  return store.listForks(runId);
}

/** The snapshots unfinished forks start from: retention keeps them while the fork may still need a restore from them. */
export async function forkPointsInUse(store: Store): Promise<Set<string>> {
  const out = new Set<string>();
  for (const r of await store.listRuns({ states: OPEN_RUN_STATES })) {
    const f = await forkedFrom(store, r);
    if (f) out.add(f.snapshotId);
  }
  return out;
}
