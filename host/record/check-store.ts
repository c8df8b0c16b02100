import { BerthError } from '../errors';
import type { Store } from '../store';
import { recordToCheck } from './build-record';
import { checkRecord, type Violation } from './invariants';

/**
 * Checks runs of a store (one, or every run): each is read as its export record (the same document,
 * unsealed), so a stored and an imported run are judged by the same code as an exported file.
 */
export async function checkStore(store: Store, runIds: string[] | 'all', now: number): Promise<{ checked: number; violations: Violation[] }> {
  const ids = runIds === 'all' ? (await store.listRuns()).map((r) => r.id) : runIds;
  const violations: Violation[] = [];
  for (const id of ids) violations.push(...checkRecord(await recordToCheck(store, id, now)));
  return { checked: ids.length, violations };
}

/** Refuses to drive an imported run (resume, reconcile, cancel, approve, deny, chat), saying what it is. */
export async function assertDrivable(store: Store, runId: string): Promise<void> {
  const imported = await store.getImportedRun(runId);
  if (!imported) return;
  throw new BerthError('run_imported', `run ${runId} was imported from an exported record (${imported.source}): it can be shown and checked, never driven`, { ids: { runId } });
}
