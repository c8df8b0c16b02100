import { summariseEgress } from '../../egress';
import { forkedFrom, forksOf } from '../../fork';
import { BerthError } from '../../errors';
import { sessionSandboxDocId } from '../../agent';
import { RUN_STATES, type Json, type Run, type RunState, type Task } from '../../model';
import { dateWindow } from '../../store';
import { sandboxDocId } from '../../run-sandbox';
import type { Store } from '../../store';
import type { CliContext } from '../context';
import { duration, emit, table } from '../output';
import { driverOf, hostView, readHost } from './run-driver';
import { acceptanceOf } from '../../acceptance';
import { runCost } from '../../cost';
import { acceptanceLine } from './acceptance';
import { costRows } from './cost';

/** What `berth status` is filtered by (flags as given). */
export interface StatusFilter {
  states?: string[];
  tags?: string[];
  search?: string;
  from?: string;
  to?: string;
}

/** The runs matching the filter, oldest first, read a page at a time by a keyset cursor. */
async function filteredRuns(store: Store, f: StatusFilter): Promise<Run[]> {
  const bad = (f.states ?? []).filter((s) => !(RUN_STATES as readonly string[]).includes(s));
  if (bad.length) throw new BerthError('usage', `--state expects one of ${RUN_STATES.join(', ')}, found "${bad[0]}"`);
  let window: ReturnType<typeof dateWindow>;
  try {
    window = dateWindow(f.from, f.to, '--');
  } catch (err) {
    // A bad flag value is a usage error (exit 2), as a bad --state is.
    throw err instanceof BerthError && err.code === 'invalid_request' ? new BerthError('usage', err.message) : err;
  }
  const out: Run[] = [];
  let after: { createdAt: number; id: string } | undefined;
  for (;;) {
    const { runs } = await store.listRunPage({ states: f.states as RunState[] | undefined, tags: f.tags, search: f.search, ...window, order: 'created', after, limit: 500, count: false });
    out.push(...runs.map(({ name: _n, tags: _t, ...run }) => run));
    if (runs.length < 500) return out;
    after = { createdAt: runs.at(-1)!.createdAt, id: runs.at(-1)!.id };
  }
}

/** `berth status`: every run (or those the filter keeps), newest last, with its state and age. */
export async function status(ctx: CliContext, f: StatusFilter = {}): Promise<number> {
  const filtered = (f.states?.length ?? 0) > 0 || (f.tags?.length ?? 0) > 0 || !!f.search || !!f.from || !!f.to;
  const runs = filtered ? await filteredRuns(ctx.store, f) : await ctx.store.listRuns();
  const now = ctx.clock.now();
  // An imported run is a record: no host drives it, and nothing may (berth resume would be refused).
  const imported = new Set((await ctx.store.listImportedRuns()).map((i) => i.runId));
  // Every owner in one read, and the database's clock once: two reads per run made a status of
  // thousands of runs thousands of round trips on PostgreSQL.
  const [owners, dbNow] = await Promise.all([ctx.store.listSessionOwners(), ctx.store.databaseNow()]);
  const ownerOf = new Map(owners.map((o) => [o.sessionId, o]));
  const rows: Array<{ run: (typeof runs)[number]; imported: boolean } & ReturnType<typeof driverOf>> = [];
  for (const r of runs) {
    rows.push(imported.has(r.id)
      ? { run: r, imported: true, owner: null, line: `${r.state}, imported record (read-only)` }
      : { run: r, imported: false, ...driverOf(r, hostView(ownerOf.get(r.sessionId), dbNow, ctx.hostId), now) });
  }
  emit(ctx.json, { runs: rows.map((r) => ({ ...r.run, owner: r.owner, imported: r.imported })) }, () =>
    runs.length === 0
      ? 'no runs'
      : table([['RUN', 'KIND', 'STATE', 'UPDATED'], ...rows.map((r) => [r.run.id, r.run.kind, r.line, `${duration(now - r.run.updatedAt)} ago`])]),
  );
  return 0;
}

import { getRunOrThrow } from '../../api/decisions';
export { getRunOrThrow };

/**
 * Everything the store knows about one run: the record an operator reads to answer "what happened?".
 * `newest`: only that many of the newest tasks (with the root task), effects and snapshots, for a
 * view that must stay small whatever the run's length (the run page, `berth show`); `shown` says
 * whether older ones were left out. Without it, every one.
 */
export async function describeRun(store: Store, runId: string, o: { newest?: number } = {}) {
  const run = await getRunOrThrow(store, runId);
  const page = o.newest === undefined ? {} : { newest: o.newest + 1 };
  const [transitions, pagedTasks, pagedEffects, pagedSnapshots, sessionLeases, documents, attempts] = await Promise.all([
    store.listRunTransitions(runId),
    store.listTasks({ runId, ...page }),
    // With those a later run attempted afresh: this run's attempts of them are part of what it did.
    store.listEffects({ runId, earlier: true, ...page }),
    store.listSnapshots({ runId, ...page }),
    store.listLeases({ sessionId: run.sessionId }).then((ls) => ls.filter((l) => l.runId === null || l.runId === runId || l.runId === run.sessionId)),
    store.listDocuments({ runId }),
    store.listEgress({ runId }),
  ]);
  // One more than the page was read: whether there are older rows is known without counting them.
  const cut = <T>(rows: T[]) => (o.newest !== undefined && rows.length > o.newest ? { rows: rows.slice(rows.length - o.newest), older: true } : { rows, older: false });
  const t = cut(pagedTasks);
  const e = cut(pagedEffects);
  const s = cut(pagedSnapshots);
  // The root task names the steps and holds the plan: a page of a long run's tasks keeps it first.
  const root = t.older && run.rootTaskId && !t.rows.some((x) => x.id === run.rootTaskId) ? await store.getTask(run.rootTaskId) : undefined;
  const tasks = root ? [root, ...t.rows] : t.rows;
  const effects = e.rows;
  const snapshots = s.rows;
  const shown = { newest: o.newest ?? null, olderTasks: t.older, olderEffects: e.older, olderSnapshots: s.older };
  const egress = summariseEgress(attempts);
  const [parent, forks] = await Promise.all([forkedFrom(store, run), forksOf(store, run.id)]);
  const current = await currentLeaseId(store, run);
  // `current`: the sandbox the run (or its agent session) records as its own; `keptBySession`: an
  // agent session's sandbox, which outlives the run on purpose (the next message continues in it).
  const leases = sessionLeases.map((l) => ({ ...l, current: l.id === current, keptBySession: l.runId === run.sessionId && l.releasedAt === null }));
  // Acceptance is apart from the run state; cost is measured and derived at this moment.
  const [acceptance, cost] = await Promise.all([acceptanceOf(store, run), runCost(store, runId, Date.now())]);
  return { run, shown, forkedFrom: parent, forks: forks.map((f) => ({ runId: f.id, state: f.state })), transitions, tasks, effects, snapshots, leases, documents: documents.map((d) => ({ id: d.id, type: d.type, version: d.version })), egress, acceptance, cost };
}

/** Tasks, effects and snapshots `berth show` prints by default: the newest, so a run of thousands of steps prints a page. */
export const SHOW_NEWEST = 50;

/** `berth show RUN [--all]`: the newest {@link SHOW_NEWEST} tasks, effects and snapshots (`--all`: every one); `--json` is complete. */
export async function show(ctx: CliContext, runId: string, all = false): Promise<number> {
  const described = await describeRun(ctx.store, runId, all || ctx.json ? {} : { newest: SHOW_NEWEST });
  // A released lease is not a stopped sandbox: what this engine still runs of each lease is shown beside it.
  const states = await Promise.all(described.leases.map((l) => ctx.sandbox.containerState(l).catch(() => 'unknown' as const)));
  const d = { ...described, leases: described.leases.map((l, i) => ({ ...l, container: states[i]! })) };
  const now = ctx.clock.now();
  const driver = driverOf(d.run, await readHost(ctx.store, now, ctx.hostId, d.run.sessionId), now);
  // An imported run is a record: no host drives it, and nothing may (berth resume would be refused).
  const imported = (await ctx.store.getImportedRun(runId)) ?? null;
  const line = imported ? `${d.run.state}, imported record (read-only; ${imported.digest})` : driver.line;
  emit(ctx.json, { ...d, owner: imported ? null : driver.owner, imported }, () => {
    const out = [`run ${d.run.id} (${d.run.kind}) ${line}`, `session ${d.run.sessionId}`];
    if (d.forkedFrom) out.push(`forked from run ${d.forkedFrom.runId} at ${d.forkedFrom.checkpoint} (snapshot ${d.forkedFrom.snapshotId})`);
    if (d.forks.length) out.push(`forks: ${d.forks.map((f) => `${f.runId} (${f.state})`).join(', ')}   (berth tree ${d.run.id})`);
    out.push('', 'transitions:');
    out.push(table(d.transitions.map((t) => [`#${t.n}`, new Date(t.at).toISOString(), `${t.from ?? '-'} -> ${t.to}`, t.actor, t.reason])));
    const older = (what: string) => `  (older ${what} not shown: the newest ${d.shown.newest}; berth show ${d.run.id} --all, or --json)`;
    out.push('', 'tasks:');
    if (d.shown.olderTasks) out.push(older('tasks'));
    const byParent = new Map<string | null, Task[]>();
    for (const t of d.tasks) byParent.set(t.parentId, [...(byParent.get(t.parentId) ?? []), t]);
    const walk = (parent: string | null, depth: number) => {
      for (const t of byParent.get(parent) ?? []) {
        const state = t.status === 'terminal' ? `${t.outcome}` : `${t.status} in ${t.phase}`;
        const extra = [t.error ? `${t.error.code}: ${t.error.message}` : '', t.blockedReason ? `blocked: ${t.blockedReason}` : '', t.restarts ? `restarts ${t.restarts}` : ''].filter(Boolean).join('; ');
        out.push(`${'  '.repeat(depth + 1)}${t.kind} ${t.id} ${state}${extra ? ` (${extra})` : ''}`);
        walk(t.id, depth + 1);
      }
    };
    walk(null, 0);
    // A page of a long run: tasks whose parent is not on the page hang under it by their parent id.
    if (d.shown.olderTasks) for (const [parent] of byParent) if (parent !== null && !d.tasks.some((t) => t.id === parent)) walk(parent, 0);
    if (d.effects.length) out.push('', 'effects:', ...(d.shown.olderEffects ? [older('effects')] : []), table(d.effects.map((e) => [e.id, e.kind, e.replay, e.status, `attempts ${e.attempts}`])));
    if (d.snapshots.length) {
      out.push('', 'snapshots:', ...(d.shown.olderSnapshots ? [older('snapshots')] : []), table(d.snapshots.map((s) => [s.id, s.checkpoint, s.imageId.slice(0, 19), s.workspaceDigest.slice(0, 19), `${(s.sizeBytes / 1e6).toFixed(1)} MB`, s.prunedAt ? 'pruned' : ''])));
    }
    out.push('', `acceptance: ${acceptanceLine(d.acceptance, d.run.id)}`);
    out.push('', 'cost:', table(costRows(d.cost)));
    if (d.egress.allowed + d.egress.denied > 0) out.push('', `egress: ${d.egress.allowed} allowed, ${d.egress.denied} denied (each attempt: berth logs ${d.run.id})`);
    if (d.egress.dropped.length) out.push('dropped by the sandbox network rules:', table(d.egress.dropped.map((x) => [x.proto, x.target, `x${x.count}`])));
    if (d.leases.length) {
      const role = (l: (typeof d.leases)[number]) =>
        [l.current ? 'current sandbox' : '', l.keptBySession ? 'kept by the agent session' : '', !l.current && !l.keptBySession && l.releasedAt === null ? 'not the run\'s sandbox (released when the run ends; berth gc)' : ''].filter(Boolean).join(', ');
      const sandbox = (l: (typeof d.leases)[number]) =>
        l.container === 'running' ? (l.releasedAt ? 'container still running here (the next sweep removes it)' : 'container running')
        : l.container === 'stopped' ? 'container stopped'
        : l.container === 'absent' ? (l.hostId === ctx.hostId ? 'container gone' : `no container on this engine (host ${l.hostId})`)
        : 'container state unknown';
      out.push('', 'leases:', table(d.leases.map((l) => [l.id, l.containerId.slice(0, 12) || '(none yet)', l.releasedAt ? 'released' : `expires ${new Date(l.expiresAt).toISOString()}`, sandbox(l), role(l)])));
    }
    return out.join('\n');
  });
  return 0;
}

/** The lease the run's sandbox pointer (a plan run's, or its agent session's) names now. */
async function currentLeaseId(store: Store, run: Run): Promise<string | null> {
  for (const id of [sandboxDocId(run.id), sessionSandboxDocId(run.sessionId)]) {
    const doc = await store.getDocument(id);
    if (!doc) continue;
    let lease = leaseOf(doc.baseline);
    for (const o of doc.ops) lease = leaseOf(o.op) ?? lease;
    return lease;
  }
  return null;
}

const leaseOf = (v: Json): string | null => (v !== null && typeof v === 'object' && !Array.isArray(v) && typeof v.leaseId === 'string' ? v.leaseId : null);
