import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The suite's longest files (minutes each; measured in a full run at load, session 17), longest first. CI starts
 * from a fresh checkout with no record of durations, so vitest would order files by size and a
 * long crash file could start last and run alone at the end: 700 s of tail in one full run.
 */
const SLOWEST = [
  'test/fault/agent-crash-every-boundary.test.ts',
  'test/fault/crash-every-boundary.test.ts',
  'test/fault/agent-notify-boundaries.test.ts',
  'test/fault/fleet-takeover.test.ts',
  'test/integration/registry-snapshots.test.ts',
  'test/integration/sweep-entries.test.ts',
  'test/fault/agent-notify-crash.test.ts',
  'test/fault/fleet-leftovers.test.ts',
  'test/integration/operator-cli.test.ts',
  'test/integration/resume-evidence.test.ts',
  'test/integration/plan-resume.test.ts',
  'test/integration/plan-fork.test.ts',
  'test/integration/plan-length.test.ts',
  'test/fault/one-owner.test.ts',
  'test/integration/plan-artifacts.test.ts',
  'test/fault/fleet-operators.test.ts',
  'test/integration/mcp-session.test.ts',
  'test/integration/plan-cancel.test.ts',
  'test/fault/notify-cli-reconcile.test.ts',
  'test/integration/agent-length.test.ts',
  'test/fault/plan-crash.test.ts',
];

/** Vitest's own order, with the known slowest files moved to the front. */
export class SlowFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (f: TestSpecification) => {
      const i = SLOWEST.findIndex((s) => f.moduleId.endsWith(s));
      return i < 0 ? SLOWEST.length : i;
    };
    // Array.prototype.sort is stable: every other file keeps vitest's order.
    return [...sorted].sort((a, b) => rank(a) - rank(b));
  }
}
