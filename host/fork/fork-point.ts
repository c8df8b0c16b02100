import { BerthError } from '../errors';
import type { Run, Snapshot } from '../model';
import type { PlanRunInput } from '../plan';
import type { Store } from '../store';
import { planInputOf } from './lineage';

/** Where a fork starts: the snapshot of a committed checkpoint, and the first step the fork runs. */
export interface ForkPoint {
  /** The run whose snapshot it is (the run asked for, or an ancestor for a point before its own fork). */
  runId: string;
  snapshot: Snapshot;
  /** The first step index the fork runs; every step before it is history. */
  index: number;
}

/** The step index a plan snapshot checkpoint continues from, or null for a checkpoint a fork cannot start at. */
export function forkIndexOf(checkpoint: string): number | null {
  if (checkpoint === 'upload') return 0;
  const step = /^step:(\d+):/.exec(checkpoint);
  if (step) return Number(step[1]) + 1;
  const before = /^reconciled:(\d+)$/.exec(checkpoint);
  return before ? Number(before[1]) : null;
}

/**
 * Resolves `--at` for a plan run: a snapshot id, a step name or number (after that step), or
 * `upload`/`0` (before the first step). A point before the run's own fork point is looked up in its
 * parent, since that is where the history came from. A snapshot that is pruned or whose image is
 * gone is refused, naming the nearest one that can still be forked from.
 */
export async function resolvePlanForkPoint(store: Store, imageExists: (id: string) => Promise<boolean>, run: Run, at: string, origin: Run = run): Promise<ForkPoint> {
  // `origin` is the run the operator named: a refusal lists its forkable checkpoints, also when the
  // point was looked up in an ancestor (whose own later checkpoints are no history of `origin`).
  const input = await planInputOf(store, run);
  if (!input) throw new BerthError('fork_invalid', `run ${run.id} is not a plan run (kind ${run.kind})`, { ids: { runId: run.id } });
  const steps = input.plan.steps;
  let wanted: number;
  if (/^snap_/.test(at)) {
    const s = await store.getSnapshot(at);
    if (!s) throw new BerthError('fork_invalid', `--at ${at}: no such snapshot in ${store.location}`, { ids: { runId: run.id } });
    const index = forkIndexOf(s.checkpoint);
    if (index !== null && s.runId === run.id) return usable(store, imageExists, origin, run.id, s, index, input);
    // A checkpoint of an ancestor is this run's history only up to this run's fork point.
    if (index !== null && input.fork && index <= input.fork.index) {
      const parent = await store.getRun(input.fork.runId);
      if (parent) return resolvePlanForkPoint(store, imageExists, parent, at, origin);
      if ((await carriedHistory(store, input)).some((h) => h.id === s.id)) return usable(store, imageExists, origin, s.runId ?? input.fork.runId, s, index, input);
    }
    throw new BerthError('fork_invalid', `--at ${at}: snapshot ${s.id} (${s.checkpoint}) is not a checkpoint of run ${run.id}`, { ids: { runId: run.id } });
  }
  if (at === 'upload' || at === '0') wanted = 0;
  else if (/^\d+$/.test(at)) wanted = Number(at);
  else {
    const i = steps.findIndex((s) => s.name === at);
    if (i < 0) throw new BerthError('fork_invalid', `--at ${at}: run ${run.id} has no step of that name (steps: ${steps.map((s) => s.name).join(', ')})`, { ids: { runId: run.id } });
    wanted = i + 1;
  }
  if (wanted > steps.length) throw new BerthError('fork_invalid', `--at ${at}: the plan of run ${run.id} has ${steps.length} steps`, { ids: { runId: run.id } });
  // Before the run's own fork point, the checkpoints are the parent's.
  if (input.fork && wanted <= input.fork.index) {
    const parent = await store.getRun(input.fork.runId);
    if (parent) return resolvePlanForkPoint(store, imageExists, parent, at, origin);
    const h = (await carriedHistory(store, input)).find((x) => forkIndexOf(x.checkpoint) === wanted);
    if (h) return usable(store, imageExists, origin, h.runId ?? input.fork.runId, h, wanted, input);
  }
  const snaps = (await store.listSnapshots({ runId: run.id })).filter((s) => forkIndexOf(s.checkpoint) === wanted);
  const s = snaps.at(-1);
  const what = wanted === 0 ? 'before the first step' : `after step ${steps[wanted - 1]!.name}`;
  if (!s) throw new BerthError('fork_invalid', `--at ${at}: run ${run.id} has no snapshot ${what}; ${await forkable(store, imageExists, origin)}`, { ids: { runId: run.id } });
  return usable(store, imageExists, origin, run.id, s, wanted, input);
}

async function usable(store: Store, imageExists: (id: string) => Promise<boolean>, run: Run, owner: string, s: Snapshot, index: number, input: PlanRunInput): Promise<ForkPoint> {
  // An image this engine lacks is still forkable when the registry has it: the restore pulls it by digest and verifies it.
  if (s.prunedAt !== null || (!(await imageExists(s.imageId)) && !(s.registryRef && s.pushedAt !== null))) {
    const why = s.prunedAt !== null ? `was pruned at ${new Date(s.prunedAt).toISOString()}` : `has no image on this engine (${s.imageId})`;
    throw new BerthError('snapshot_pruned', `snapshot ${s.id} (${s.checkpoint}) of run ${owner} ${why}; ${await forkable(store, imageExists, run)}`, { ids: { runId: run.id, snapshotId: s.id } });
  }
  if (index > input.plan.steps.length) throw new BerthError('fork_invalid', `snapshot ${s.id} (${s.checkpoint}) is past the end of the plan`, { ids: { runId: run.id } });
  return { runId: owner, snapshot: s, index };
}

/**
 * The history of a fork whose parent is not in this store (a fork imported alone): the snapshots its
 * record carried, from its fork point back through their parents, newest first. Only this chain is
 * its history; other rows of the parent run (another imported fork's) may lie past its fork point.
 */
async function carriedHistory(store: Store, input: PlanRunInput): Promise<Snapshot[]> {
  const out: Snapshot[] = [];
  const seen = new Set<string>();
  for (let id: string | null = input.fork?.snapshotId ?? null; id && !seen.has(id); ) {
    seen.add(id);
    const s = await store.getSnapshot(id);
    if (!s) break;
    out.push(s);
    id = s.parentId;
  }
  return out;
}

/** The checkpoints of `run` (and of its ancestors before its fork point) that can still be forked from. */
export async function forkable(store: Store, imageExists: (id: string) => Promise<boolean>, run: Run): Promise<string> {
  const out: string[] = [];
  const canFork = async (s: Snapshot) => forkIndexOf(s.checkpoint) !== null && s.prunedAt === null && ((s.registryRef && s.pushedAt !== null) || (await imageExists(s.imageId)));
  // An ancestor's checkpoints are history only up to the fork point of the run forked from it.
  let upTo = Number.POSITIVE_INFINITY;
  for (let r: Run | undefined = run; r; ) {
    const input = await planInputOf(store, r);
    for (const s of (await store.listSnapshots({ runId: r.id })).reverse()) {
      if ((forkIndexOf(s.checkpoint) ?? Number.POSITIVE_INFINITY) <= upTo && (await canFork(s))) out.push(`${s.id} (${s.checkpoint}${r.id === run.id ? '' : ` of ${r.id}`})`);
    }
    if (input?.fork) upTo = Math.min(upTo, input.fork.index);
    const parent = input?.fork ? await store.getRun(input.fork.runId) : undefined;
    if (input?.fork && !parent) {
      for (const s of await carriedHistory(store, input)) if (await canFork(s)) out.push(`${s.id} (${s.checkpoint} of ${s.runId ?? input.fork.runId})`);
    }
    r = parent;
  }
  return out.length ? `forkable: ${out.join(', ')}` : 'no checkpoint of it can be forked from any more';
}
