import { isFinalRunState, type CostTotal, type Run } from '../model';
import type { Page, Store } from '../store';

/** Token counts of one model, as its endpoint reported them. */
export interface TokenCount {
  requests: number;
  prompt: number;
  completion: number;
  /** Prompt tokens the endpoint served from its cache (part of `prompt`), where it reports them. */
  cached: number;
}

/**
 * What one run cost. Tokens and sandbox CPU/memory are measured as they are spent (cost samples);
 * lease time, stored bytes, approval waits and recovery work are read from the run's records.
 */
export interface RunCost {
  tokens: Record<string, TokenCount>;
  /** Container CPU time over the run's measured execs (plan steps, the acceptance command, agent exec tools). */
  cpuSeconds: number;
  /** Container memory in use over those execs, GB (1e9 bytes) × seconds. */
  memoryGbSeconds: number;
  execs: number;
  /** Wall time of the run's leases (an agent session's kept sandbox: the part inside the run's life). */
  leaseSeconds: number;
  /** Snapshot bytes the run stores now (pruned snapshots no longer count). */
  snapshotBytes: number;
  /** Snapshot storage over time: GB × months (30 days) each snapshot was or is kept. */
  snapshotGbMonths: number;
  /** Time tool calls waited for an approval decision (an open one counts until now). */
  approvalWaitSeconds: number;
  recovery: {
    /** Commands run again: effect attempts beyond the first, and safe steps re-run on a restored sandbox. */
    stepsRerun: number;
    /** Sandboxes restored from a snapshot. */
    restores: number;
  };
}

const MONTH_MS = 30 * 24 * 3600 * 1000;

export function emptyCost(): RunCost {
  return { tokens: {}, cpuSeconds: 0, memoryGbSeconds: 0, execs: 0, leaseSeconds: 0, snapshotBytes: 0, snapshotGbMonths: 0, approvalWaitSeconds: 0, recovery: { stepsRerun: 0, restores: 0 } };
}

/** One run's cost, at `now` (open leases, kept snapshots and open approvals count until then). */
export async function runCost(store: Store, runId: string, now: number): Promise<RunCost> {
  const run = await store.getRun(runId);
  if (!run) return emptyCost();
  return costOfRun(store, run, await store.sumCost({ runIds: [runId] }), now);
}

const PAGE = 500;

async function* pages<T>(read: (page: Page) => Promise<T[]>): AsyncGenerator<T[]> {
  for (let offset = 0; ; offset += PAGE) {
    const rows = await read({ offset, limit: PAGE });
    yield rows;
    if (rows.length < PAGE) return;
  }
}

/** The cost of `run` given its summed samples (so a report over many runs reads them in one query). */
export async function costOfRun(store: Store, run: Run, samples: readonly CostTotal[], now: number): Promise<RunCost> {
  const c = emptyCost();
  for (const s of samples) {
    if (s.runId !== run.id) continue;
    const t = (c.tokens[s.key] ??= { requests: 0, prompt: 0, completion: 0, cached: 0 });
    if (s.meter === 'model.requests') t.requests += s.amount;
    else if (s.meter === 'tokens.prompt') t.prompt += s.amount;
    else if (s.meter === 'tokens.completion') t.completion += s.amount;
    else if (s.meter === 'tokens.cached') t.cached += s.amount;
    else if (s.meter === 'cpu.usec') c.cpuSeconds += s.amount / 1e6;
    else if (s.meter === 'memory.byte_ms') c.memoryGbSeconds += s.amount / 1e9 / 1000;
    else if (s.meter === 'exec.count') c.execs += s.amount;
    else if (s.meter === 'sandbox.restores') c.recovery.restores += s.amount;
  }
  // A key that only carried sandbox meters (a lease id) is no model.
  for (const [k, t] of Object.entries(c.tokens)) if (t.requests + t.prompt + t.completion + t.cached === 0) delete c.tokens[k];
  const end = isFinalRunState(run.state) ? run.updatedAt : now;
  // A run thousands of steps long is read in pages (snapshots, effects, entries): `berth export`
  // and `berth show` stay in bounded memory. The sums run in the same order as over whole lists.
  for (const l of await store.listLeases({ sessionId: run.sessionId })) {
    // A lease of this run, or the session's kept sandbox for the part of its life inside this run.
    const from = l.runId === run.id ? l.createdAt : l.runId === run.sessionId ? Math.max(l.createdAt, run.createdAt) : null;
    if (from === null) continue;
    const to = l.runId === run.id ? (l.releasedAt ?? now) : Math.min(l.releasedAt ?? now, end);
    if (to > from) c.leaseSeconds += (to - from) / 1000;
  }
  for await (const snapshots of pages((page) => store.listSnapshots({ runId: run.id, page }))) {
    for (const s of snapshots) {
      if (s.prunedAt === null) c.snapshotBytes += s.sizeBytes;
      c.snapshotGbMonths += (s.sizeBytes / 1e9) * (Math.max(0, (s.prunedAt ?? now) - s.createdAt) / MONTH_MS);
    }
  }
  for await (const effects of pages((page) => store.listEffects({ runId: run.id, page }))) {
    for (const e of effects) {
      c.recovery.stepsRerun += Math.max(0, e.attempts - 1);
      if (e.id.includes(':after-restore:')) c.recovery.stepsRerun += 1;
    }
  }
  const asked = new Map<string, number>();
  for (let after = 0; run.kind === 'agent'; ) {
    const entries = await store.listEntries(run.sessionId, { runId: run.id, afterSeq: after, limit: PAGE });
    for (const e of entries) {
      const body = e.body as { approvalId?: string } | null;
      if (!body?.approvalId) continue;
      if (e.kind === 'agent.approval.requested') asked.set(body.approvalId, e.at);
      else if (e.kind === 'agent.approval.decided' && asked.has(body.approvalId)) {
        c.approvalWaitSeconds += (e.at - asked.get(body.approvalId)!) / 1000;
        asked.delete(body.approvalId);
      }
    }
    if (entries.length < PAGE) break;
    after = entries.at(-1)!.seq;
  }
  for (const at of asked.values()) c.approvalWaitSeconds += (end - at) / 1000;
  return c;
}

/** `a + b`, field by field (tokens merged by model). */
export function addCost(a: RunCost, b: RunCost): RunCost {
  const tokens: Record<string, TokenCount> = structuredClone(a.tokens);
  for (const [m, t] of Object.entries(b.tokens)) {
    const x = (tokens[m] ??= { requests: 0, prompt: 0, completion: 0, cached: 0 });
    x.requests += t.requests;
    x.prompt += t.prompt;
    x.completion += t.completion;
    x.cached += t.cached;
  }
  return {
    tokens,
    cpuSeconds: a.cpuSeconds + b.cpuSeconds,
    memoryGbSeconds: a.memoryGbSeconds + b.memoryGbSeconds,
    execs: a.execs + b.execs,
    leaseSeconds: a.leaseSeconds + b.leaseSeconds,
    snapshotBytes: a.snapshotBytes + b.snapshotBytes,
    snapshotGbMonths: a.snapshotGbMonths + b.snapshotGbMonths,
    approvalWaitSeconds: a.approvalWaitSeconds + b.approvalWaitSeconds,
    recovery: { stepsRerun: a.recovery.stepsRerun + b.recovery.stepsRerun, restores: a.recovery.restores + b.recovery.restores },
  };
}

/** Every figure divided by `n` (cost per accepted run). */
export function divideCost(c: RunCost, n: number): RunCost {
  const tokens = Object.fromEntries(Object.entries(c.tokens).map(([m, t]) => [m, { requests: t.requests / n, prompt: t.prompt / n, completion: t.completion / n, cached: t.cached / n }]));
  return {
    tokens,
    cpuSeconds: c.cpuSeconds / n,
    memoryGbSeconds: c.memoryGbSeconds / n,
    execs: c.execs / n,
    leaseSeconds: c.leaseSeconds / n,
    snapshotBytes: c.snapshotBytes / n,
    snapshotGbMonths: c.snapshotGbMonths / n,
    approvalWaitSeconds: c.approvalWaitSeconds / n,
    recovery: { stepsRerun: c.recovery.stepsRerun / n, restores: c.recovery.restores / n },
  };
}
