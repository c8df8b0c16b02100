import { BerthError } from '../errors';
import type { Snapshot } from '../model';
import type { ImportRows } from './imported';

/**
 * The ids an import writes that must be new to the store, with every table that holds that kind
 * of id (a submission or acceptance decision id is unique across the live and the imported table,
 * as reads look in both). Table names are fixed here, never taken from a record.
 */
export function importKeys(r: ImportRows): Array<{ what: string; tables: string[]; ids: string[] }> {
  return [
    { what: 'session', tables: ['sessions'], ids: [r.session.id] },
    { what: 'run', tables: ['runs'], ids: [r.run.id] },
    { what: 'submission', tables: ['submissions', 'imported_submissions'], ids: r.submission ? [r.submission.id] : [] },
    { what: 'task', tables: ['tasks'], ids: r.tasks.map((t) => t.id) },
    { what: 'entry', tables: ['entries'], ids: r.entries.map((e) => e.id) },
    { what: 'document', tables: ['documents'], ids: r.documents.map((d) => d.id) },
    { what: 'lease', tables: ['leases'], ids: r.leases.map((l) => l.id) },
    { what: 'acceptance decision', tables: ['acceptance_decisions', 'imported_acceptance'], ids: r.acceptance.map((a) => a.id) },
    { what: 'artifact', tables: ['artifacts'], ids: r.artifacts.map((a) => a.id) },
    // Effects are keyed by the imported run (imported_effects): only a repeat inside the record collides.
    { what: 'effect', tables: [], ids: r.effects.map((e) => e.id) },
    // Checked apart (see sharedSnapshots): a fork's record carries its parent's snapshots too.
    { what: 'snapshot', tables: [], ids: r.snapshots.map((s) => s.id) },
  ];
}

/** Ids that appear more than once in one list of the record. */
export function repeatedIds(ids: string[]): string[] {
  const seen = new Set<string>();
  const twice = new Set<string>();
  for (const id of ids) (seen.has(id) ? twice : seen).add(id);
  return [...twice];
}

/** What makes a snapshot the one it is: fixed when it was taken. */
const SNAPSHOT_IDENTITY = ['runId', 'taskId', 'leaseId', 'imageId', 'workspaceDigest', 'sizeBytes', 'checkpoint', 'parentId', 'commitSeq', 'createdAt'] as const;
/** What the store that took it learns later (pruned, pushed), compared only between imported copies. */
const SNAPSHOT_LATER = ['prunedAt', 'registryRef', 'pushedAt'] as const;

/**
 * The record's snapshots the store already holds, split into those it may share and those that
 * collide. A fork's record carries the snapshots of the run it was forked from (its history), so
 * importing a run and then its fork meets the same snapshot twice: an imported copy with the very
 * same content is one fact, written once (imported rows never change, so the later record still
 * reads back as exported); a copy that differs (the exporter pruned it between the two exports)
 * collides. A fork coming back to the store its parent lives in (the parent exported, forked
 * elsewhere, the fork exported again) meets the parent's live rows: the same snapshot when it was
 * taken the same, and this store's row is the authority on whether it was pruned or pushed since,
 * so it is shared too; a live row taken otherwise collides.
 */
export function sharedSnapshots(
  record: ImportRows['snapshots'],
  held: Array<{ snapshot: Snapshot; imported: boolean }>,
): { shared: Set<string>; colliding: string[] } {
  const byId = new Map(held.map((h) => [h.snapshot.id, h]));
  const shared = new Set<string>();
  const colliding: string[] = [];
  for (const s of record) {
    const h = byId.get(s.id);
    if (!h) continue;
    const equal = (fields: readonly (keyof Snapshot)[]) => fields.every((f) => (h.snapshot[f] ?? null) === ((s as Partial<Snapshot>)[f] ?? null));
    const same = equal(SNAPSHOT_IDENTITY) && (!h.imported || equal(SNAPSHOT_LATER));
    if (same) shared.add(s.id);
    else colliding.push(s.id);
  }
  return { shared, colliding };
}

/** Lists at most this many ids of one kind in the message (all of them are in `details`). */
const NAMED = 10;

/**
 * `import_conflict` naming every id of the record that is already in use in the store (or that
 * the record itself repeats), by kind (`task`, `snapshot (another copy)`, `effect (twice in the
 * record)`, ...); nothing was written.
 */
export function importConflict(runId: string, location: string, found: Record<string, string[]>): BerthError {
  const parts = Object.entries(found)
    .filter(([, ids]) => ids.length > 0)
    .map(([what, ids]) => `${what} ${ids.slice(0, NAMED).join(', ')}${ids.length > NAMED ? ` and ${ids.length - NAMED} more` : ''}`);
  return new BerthError(
    'import_conflict',
    `run ${runId} was not imported into ${location}: ids of its record are already in use there: ${parts.join('; ')}. Nothing was written; import into a store without them`,
    { ids: { runId }, details: { collisions: found } },
  );
}

/**
 * Judges what an import collides with, from what each dialect found: `inUse` (per kind of
 * {@link importKeys}, the ids its tables already hold) and `heldSnapshots` (the store's rows of the
 * record's snapshot ids, and whether each belongs to an imported run). Throws
 * {@link importConflict}; returns the snapshot ids to leave out (already held, identical, imported).
 */
export function judgeImportKeys(r: ImportRows, location: string, inUse: Map<string, string[]>, heldSnapshots: Array<{ snapshot: Snapshot; imported: boolean }>): Set<string> {
  const found: Record<string, string[]> = {};
  for (const k of importKeys(r)) {
    const twice = repeatedIds(k.ids);
    if (twice.length) found[`${k.what} (twice in the record)`] = twice;
    const held = inUse.get(k.what) ?? [];
    if (held.length) found[k.what] = held;
  }
  const snaps = sharedSnapshots(r.snapshots, heldSnapshots);
  if (snaps.colliding.length) found['snapshot (held with other content)'] = snaps.colliding;
  if (Object.keys(found).length) throw importConflict(r.run.id, location, found);
  return snaps.shared;
}

/** True for a unique or primary key violation of either store (a row another writer added after the checks). */
export function isUniqueViolation(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === 'SQLITE_CONSTRAINT_UNIQUE';
}
