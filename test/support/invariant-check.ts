import { checkStore, type InvariantName, type Violation } from '../../host/record';
import type { Store } from '../../host/store';
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
      const look = (s: StoreReader) => checkStore(s, 'all', Date.now());
      const { violations } = typeof store === 'string' ? await readStore(store, look) : await look(store);
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
