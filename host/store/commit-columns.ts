import type { CommitConflict, TaskChanges } from './commit-input';
import { json } from './sqlite/rows';

/** Thrown inside a store's commit transaction to roll it back; never escapes the store's commit. */
export class Conflict {
  constructor(readonly conflict: CommitConflict) {}
}

/** Where each changeable task field lives in both stores' `tasks` table, and how it is encoded there. */
export const TASK_COLUMNS: Record<keyof TaskChanges, { column: string; encode: (v: never) => unknown }> = {
  status: { column: 'status', encode: (v) => v },
  phase: { column: 'phase', encode: (v) => v },
  checkpoint: { column: 'checkpoint_json', encode: (v) => json(v) },
  attempts: { column: 'attempts', encode: (v) => v },
  restarts: { column: 'restarts', encode: (v) => v },
  wait: { column: 'wait_json', encode: (v) => (v === null ? null : json(v)) },
  wakeAt: { column: 'wake_at', encode: (v) => v },
  outcome: { column: 'outcome', encode: (v) => v },
  result: { column: 'result_json', encode: (v) => json(v) },
  error: { column: 'error_json', encode: (v) => (v === null ? null : json(v)) },
  blockedReason: { column: 'blocked_reason', encode: (v) => v },
};
