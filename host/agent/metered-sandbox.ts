import type { ToolSandbox } from '../../tools';
import type { Lease } from '../sandbox';
import type { Store } from '../store';
import type { CommandBudget } from './run-budget';

/**
 * The sandbox as a tool uses it, with every command's CPU and memory measured (host/sandbox
 * exec-usage.ts) and recorded as a cost sample of the run as soon as the command ends: before the
 * tool's result commits, so a tool call a crash makes run again is counted each time it ran.
 * With a `budget` its commands are also held to what is left of the run's `resources.runBudgetS`.
 */
export function meteredSandbox(inner: ToolSandbox, o: { store: Store; runId: string; lease: Lease; now: () => number; budget?: CommandBudget }): ToolSandbox {
  return {
    exec: async (cmd, asked = {}) => {
      // With a budget (a call's run), the command gets at most what is left of the run's (run-budget.ts).
      const { opts, cut } = o.budget ? o.budget.limit(asked) : { opts: asked, cut: false };
      const r = await inner.exec(cmd, { ...opts, measure: true });
      o.budget?.counted(r, cut);
      if (r.usage) {
        // Synced with the call's next commit (its result, or a later one): a host killed after the
        // command still has the sample, and so counts a call it runs again each time it ran.
        await o.store.recordCost({ runId: o.runId, at: o.now(), key: o.lease.id, meters: { 'cpu.usec': r.usage.cpuUsec, 'memory.byte_ms': r.usage.memoryByteMs, 'exec.count': 1 } }, { sync: 'with-next-commit' });
      }
      return r;
    },
    readFile: (path, opts) => inner.readFile(path, opts),
    writeFile: (path, data, opts) => {
      o.budget?.wrote();
      return inner.writeFile(path, data, opts);
    },
    list: (path) => inner.list(path),
  };
}
