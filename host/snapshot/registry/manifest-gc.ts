import type { Logger } from 'pino';
import { isBerthError } from '../../errors';
import type { Snapshot } from '../../model';
import type { Store } from '../../store';
import type { Clock } from '../../support';
import type { ManifestDeleteOutcome } from './manifest-delete';

export interface ManifestGcDeps {
  store: Store;
  clock: Clock;
  logger: Logger;
  /** Deletes one manifest (`repo@sha256:…`) from its registry ({@link deleteManifest} with the registry's credentials). */
  deleteManifest(ref: string, signal?: AbortSignal): Promise<ManifestDeleteOutcome>;
}

/** What one pass did: manifests deleted (or found gone), and those left for the next gc with the reason. */
export interface ManifestGcReport {
  deleted: string[];
  pending: Array<{ registryRef: string; error: string }>;
}

/**
 * Deletes from the registry the manifests of pruned snapshots: retention and `berth gc` remove the
 * local image, this removes the pushed copy. A manifest is deleted only when no unpruned record
 * (of any session: a reuse tag, a session fork) names it, and records of imported runs are left
 * alone (their manifests belong to the exporting store). What is due is derived from the records
 * each time, against the deletions already recorded, so a host that died after pruning, or a
 * registry that did not answer, leaves the deletion due for the next pass: it is reported in
 * `pending`, never fails the gc. A manifest pushed again after its recorded deletion (the same
 * image reused later) is due again once that record is pruned too.
 *
 * `sessionId` limits the pass to that session's pruned records (retention at the end of a run).
 */
export async function deletePrunedManifests(d: ManifestGcDeps, opts: { sessionId?: string; signal?: AbortSignal } = {}): Promise<ManifestGcReport> {
  // The pushed records only, the pruned ones of the session when one is given: a run's end does
  // not read every record of the store (each one a snapshot long since pruned with no copy).
  const live = new Set((await d.store.listSnapshots({ pruned: false, pushed: true })).map((s) => s.registryRef!));
  const all = await d.store.listSnapshots({ ...(opts.sessionId !== undefined ? { sessionId: opts.sessionId } : {}), pruned: true, pushed: true });
  const done = new Map((await d.store.listRegistryDeletes()).map((r) => [r.registryRef, r.deletedAt]));
  const imported = new Map<string, boolean>();
  const isImported = async (sessionId: string) => {
    if (!imported.has(sessionId)) imported.set(sessionId, await d.store.isImportedSession(sessionId));
    return imported.get(sessionId)!;
  };
  // Per manifest, the newest time it was pushed by any pruned record naming it.
  const due = new Map<string, number>();
  for (const s of all) {
    if (s.registryRef === null || live.has(s.registryRef)) continue;
    if (await isImported(s.sessionId)) continue;
    due.set(s.registryRef, Math.max(due.get(s.registryRef) ?? 0, pushTime(s)));
  }
  const report: ManifestGcReport = { deleted: [], pending: [] };
  // A registry that did not answer once is not asked again in this pass: one timeout per registry, not one per manifest.
  const down = new Map<string, string>();
  for (const [ref, pushed] of due) {
    const deletedAt = done.get(ref);
    // Equal times are ambiguous (two hosts' clocks): deleting again is harmless, a 404 counts as done.
    if (deletedAt !== undefined && deletedAt > pushed) continue;
    opts.signal?.throwIfAborted();
    const registry = ref.split('/')[0]!;
    if (down.has(registry)) {
      report.pending.push({ registryRef: ref, error: down.get(registry)! });
      continue;
    }
    try {
      const outcome = await d.deleteManifest(ref, opts.signal);
      await d.store.recordRegistryDelete(ref, d.clock.now());
      d.logger.info({ registryRef: ref, outcome }, 'pruned snapshot manifest deleted from the registry');
      report.deleted.push(ref);
    } catch (err) {
      if (opts.signal?.aborted) throw err;
      const error = isBerthError(err) ? err.message : String(err);
      if (isBerthError(err, 'registry_unreachable')) down.set(registry, error);
      d.logger.warn({ registryRef: ref, error }, 'pruned snapshot manifest not deleted from the registry; the next gc tries again');
      report.pending.push({ registryRef: ref, error });
    }
  }
  return report;
}

const pushTime = (s: Snapshot) => s.pushedAt ?? s.createdAt;
