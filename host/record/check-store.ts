import { BerthError, isBerthError } from '../errors';
import type { Json } from '../model';
import type { Store } from '../store';
import { recordToCheck } from './build-record';
import { checkRecord, type Violation } from './invariants';

/** A run whose stored rows this build cannot read (a row edited by hand, or garbled): it cannot be judged, which is itself a finding. */
export interface UnreadableRun {
  runId: string;
  code: string;
  message: string;
  details: Json;
}

/**
 * Checks runs of a store (one, or every run): each is read as its export record (the same document,
 * unsealed), so a stored and an imported run are judged by the same code as an exported file. A run
 * whose rows do not read is reported in `unreadable` and the others are still checked: one tampered
 * row must not hide what is wrong with every other run.
 */
export async function checkStore(store: Store, runIds: string[] | 'all', now: number): Promise<{ checked: number; violations: Violation[]; unreadable: UnreadableRun[] }> {
  const ids = runIds === 'all' ? (await store.listRuns()).map((r) => r.id) : runIds;
  const violations: Violation[] = [];
  const unreadable: UnreadableRun[] = [];
  for (const id of ids) {
    try {
      violations.push(...checkRecord(await recordToCheck(store, id, now)));
    } catch (err) {
      if (!isBerthError(err, 'store_row_invalid')) throw err;
      unreadable.push({ runId: id, code: err.code, message: err.message, details: (err.details ?? null) as Json });
    }
  }
  return { checked: ids.length, violations, unreadable };
}

/** Refuses to drive an imported run (resume, reconcile, cancel, approve, deny, chat), saying what it is. */
export async function assertDrivable(store: Store, runId: string): Promise<void> {
  const imported = await store.getImportedRun(runId);
  if (!imported) return;
  throw new BerthError('run_imported', `run ${runId} was imported from an exported record (${imported.source}): it can be shown and checked, never driven`, { ids: { runId } });
}
