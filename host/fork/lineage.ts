import { storedValue } from '../kernel';
import { isFinalRunState, type Run } from '../model';
import { PlanRunInputSchema, type PlanRunInput } from '../plan';
import type { Store } from '../store';

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
  return (await planInputOf(store, run))?.fork ?? null;
}

/** A run and its forks, recursively, in creation order. */
export interface LineageNode {
  run: Run;
  forkedFrom: ForkedFrom | null;
  children: LineageNode[];
}

/**
 * The lineage a run belongs to, from its oldest ancestor down. Forks are found from what each run
 * records about its parent, so one pass over the store's runs builds the whole tree.
 */
export async function lineageOf(store: Store, runId: string): Promise<{ root: LineageNode; parents: Map<string, ForkedFrom> }> {
  const runs = await store.listRuns();
  const parents = new Map<string, ForkedFrom>();
  for (const r of runs) {
    const f = await forkedFrom(store, r);
    if (f) parents.set(r.id, f);
  }
  const byId = new Map(runs.map((r) => [r.id, r]));
  let top = byId.get(runId);
  for (let hops = 0; top && parents.has(top.id) && hops < runs.length; hops++) top = byId.get(parents.get(top.id)!.runId) ?? top;
  const build = (run: Run): LineageNode => ({
    run,
    forkedFrom: parents.get(run.id) ?? null,
    children: runs.filter((r) => parents.get(r.id)?.runId === run.id && r.id !== run.id).map(build),
  });
  return { root: build(top!), parents };
}

/** The runs forked directly from `runId`. */
export async function forksOf(store: Store, runId: string): Promise<Run[]> {
  const out: Run[] = [];
  for (const r of await store.listRuns()) if ((await forkedFrom(store, r))?.runId === runId) out.push(r);
  return out;
}

/** The snapshots unfinished forks start from: retention keeps them while the fork may still need a restore from them. */
export async function forkPointsInUse(store: Store): Promise<Set<string>> {
  const out = new Set<string>();
  for (const r of await store.listRuns()) {
    if (isFinalRunState(r.state)) continue;
    const f = await forkedFrom(store, r);
    if (f) out.add(f.snapshotId);
  }
  return out;
}
