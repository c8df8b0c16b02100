import { livenessOf } from '../fleet';
import { RUN_STATES } from '../model';
import type { Store } from '../store';

const line = (name: string, labels: Record<string, string>, value: number) => {
  const l = Object.entries(labels).map(([k, v]) => `${k}="${v.replace(/["\\\n]/g, '_')}"`).join(',');
  return `${name}${l ? `{${l}}` : ''} ${value}`;
};

/**
 * `GET /metrics` of `berth serve`: the fleet's state from the store, in the Prometheus text format
 * (read at each scrape; nothing is kept in the process). Counters are derived from records, so
 * every `berth serve` of a store reports the same numbers. Runs, snapshots and ownership changes
 * are counted by the store: a scrape used to read every run, snapshot and owner row of a store
 * that only grows (20,000 runs: 390 ms a scrape, the server answering nothing else meanwhile).
 */
export async function metricsText(store: Store, hostId: string): Promise<string> {
  const [byState, hosts, changes, snapshots, leases, now] = await Promise.all([
    store.countRunsByState(),
    store.listHosts(),
    store.ownershipChanges(),
    store.snapshotTotals(),
    store.listLeases({ unreleased: true }),
    store.databaseNow(),
  ]);
  const out: string[] = [];
  out.push('# HELP berth_runs Runs by state.', '# TYPE berth_runs gauge');
  for (const state of RUN_STATES) out.push(line('berth_runs', { state }, byState[state] ?? 0));
  out.push('# HELP berth_workers Worker processes by liveness (from their heartbeats).', '# TYPE berth_workers gauge');
  const live = hosts.map((h) => livenessOf(h, now, hostId));
  for (const state of ['live', 'stale', 'dead', 'draining', 'stopped'] as const) out.push(line('berth_workers', { state }, live.filter((s) => s === state).length));
  out.push('# HELP berth_worker_slots_in_use Runs the live workers drive, as they last reported.', '# TYPE berth_worker_slots_in_use gauge');
  out.push(line('berth_worker_slots_in_use', {}, hosts.reduce((n, h, i) => n + (live[i] === 'live' || live[i] === 'draining' ? (h.report?.slotsInUse ?? 0) : 0), 0)));
  out.push('# HELP berth_runs_left Runs live workers leave because they cannot start them there.', '# TYPE berth_runs_left gauge');
  out.push(line('berth_runs_left', {}, new Set(hosts.flatMap((h, i) => (live[i] === 'live' ? (h.report?.left ?? []).map((l) => l.sessionId) : []))).size));
  out.push('# HELP berth_ownership_changes_total Claims of sessions after their first (take-overs, drains, restarts).', '# TYPE berth_ownership_changes_total counter');
  out.push(line('berth_ownership_changes_total', {}, changes));
  out.push('# HELP berth_snapshots Snapshot records not pruned, by whether they are in a registry.', '# TYPE berth_snapshots gauge');
  out.push(line('berth_snapshots', { pushed: 'true' }, snapshots.pushed));
  out.push(line('berth_snapshots', { pushed: 'false' }, snapshots.unpushed));
  out.push('# HELP berth_registry_snapshot_bytes Layer bytes of the pushed, unpruned snapshots (as recorded at snapshot).', '# TYPE berth_registry_snapshot_bytes gauge');
  out.push(line('berth_registry_snapshot_bytes', {}, snapshots.pushedBytes));
  out.push('# HELP berth_leases_active Sandbox leases not released.', '# TYPE berth_leases_active gauge');
  out.push(line('berth_leases_active', {}, leases.length));
  return `${out.join('\n')}\n`;
}
