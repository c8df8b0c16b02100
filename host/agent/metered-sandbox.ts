import type { ToolSandbox } from '../../tools';
import type { Lease } from '../sandbox';
import type { Store } from '../store';
import type { CommandBudget } from './run-budget';

/**
 * The sandbox as a tool uses it, with every command's CPU and memory measured (host/sandbox
 * exec-usage.ts) and recorded as a cost sample of the run as soon as the command ends: before the
 * tool's result commits, so a tool call a crash makes run again is counted each time it ran.
 * With a `budget` its commands are also held to what is left of the run's `resources.runBudgetS`,
 * and its writes refused once that is spent.
 */
export function meteredSandbox(inner: ToolSandbox, o: { store: Store; runId: string; lease: Lease; now: () => number; budget?: CommandBudget }): ToolSandbox {
  return {
    exec: async (cmd, asked = {}) => {
      // One clock for what is counted and where the command is cut: from here, before the exec's
      // setup (and the exposure of its secret files, a command each), to its answer (run-budget.ts).
      const askedAt = performance.now();
      const opts = o.budget ? o.budget.limit(asked, askedAt) : asked;
      const r = await inner.exec(cmd, { ...opts, measure: true });
      o.budget?.counted(performance.now() - askedAt, r);
      if (r.usage) {
        // Synced with the call's next commit (its result, or a later one): a host killed after the
        // command still has the sample, and so counts a call it runs again each time it ran.
        await o.store.recordCost({ runId: o.runId, at: o.now(), key: o.lease.id, meters: { 'cpu.usec': r.usage.cpuUsec, 'memory.byte_ms': r.usage.memoryByteMs, 'exec.count': 1 } }, { sync: 'with-next-commit' });
      }
      return r;
    },
    readFile: (path, opts) => inner.readFile(path, opts),
    writeFile: (path, data, opts) => {
      if (o.budget && !o.budget.settling) o.budget.assertLeft();
      o.budget?.wrote();
      return inner.writeFile(path, data, opts);
    },
    // A listing is one helper command in the sandbox (host/sandbox file-ops.ts): counted, not cut.
    list: async (path) => {
      const at = performance.now();
      try {
        return await inner.list(path);
      } finally {
        o.budget?.spent(performance.now() - at);
      }
    },
  };
}
