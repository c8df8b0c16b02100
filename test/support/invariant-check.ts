import { checkStore, type InvariantName, type Violation } from '../../host/record';
import type { Store } from '../../host/store';
import { streamedExportDifferences } from './export-equality';
import { readStore } from './temp-store';

/** Any store (SQLite or PostgreSQL): the check reads through the Store port only. */
type StoreReader = Store;

/**
 * The fixtures' invariant check (issue 17): after each test, every run its store holds is read as
 * its export record and checked (`berth check --all`); a violation fails the test, naming the
 * invariant and its evidence. A test that corrupts records or kills a host on purpose opts out of
 * named invariants only, with a reason: `allowViolations(reason, names)`.
 */
export function invariantGuard() {
  let allowed: { reason: string; names: Set<InvariantName> } | undefined;
  return {
    allowViolations(reason: string, names: InvariantName[]): void {
      if (reason.trim() === '' || names.length === 0) throw new Error('allowViolations needs a reason and the invariants it allows');
      allowed = { reason, names: new Set(names) };
    },
    async check(store: string | StoreReader): Promise<Error | undefined> {
      // The same look also holds `berth export`'s streamed text equal to the whole export's, run by run.
      const look = async (s: StoreReader) => ({ ...(await checkStore(s, 'all', Date.now())), exportDiffs: await streamedExportDifferences(s) });
      const { violations, unreadable, exportDiffs } = typeof store === 'string' ? await readStore(store, look) : await look(store);
      if (unreadable.length) {
        const text = unreadable.map((u) => `\n  ${u.runId}: ${u.message}`).join('');
        console.error(`[invariant check] unreadable rows:${text}`);
        return new Error(`[invariant check] unreadable rows:${text}`);
      }
      if (exportDiffs.length) {
        console.error(`[export check] ${exportDiffs.join('\n')}`);
        return new Error(`[export check] ${exportDiffs.join('\n')}`);
      }
      const excused = violations.filter((v) => allowed?.names.has(v.invariant));
      const failing = violations.filter((v) => !excused.includes(v));
      if (excused.length) console.warn(`[invariant check] allowed (${allowed!.reason}): ${describe(excused)}`);
      if (failing.length === 0) return undefined;
      const text = describe(failing);
      console.error(`[invariant check] ${text}`);
      return new Error(`[invariant check] ${text}`);
    },
  };
}

const describe = (vs: Violation[]) => vs.map((v) => `\n  ${v.invariant}: ${v.runId}: ${v.message} evidence=${JSON.stringify(v.evidence)}`).join('');
