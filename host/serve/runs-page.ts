import { acceptanceOf, type AcceptanceView } from '../acceptance';
import { costOfRun, type RunCost } from '../cost';
import type { Run, RunState } from '../model';
import type { ServeDeps } from './deps';
import { html, type SafeHtml } from './html';
import { duration, stateBadge, when } from './layout';

/** States that wait for a person: listed first. */
export const NEEDS_A_PERSON: readonly RunState[] = ['awaiting_approval', 'needs_reconciliation'];
const FINAL: readonly RunState[] = ['completed', 'failed', 'cancelled'];

/** One row of the runs list; also an item of `GET /api/runs`. */
export interface RunRow {
  run: Run;
  owner: string;
  needsPerson: boolean;
  durationMs: number;
  acceptance: AcceptanceView;
  cost: RunCost;
}

/** Every run (optionally of some states), those needing a person first, then newest first. */
export async function readRuns(deps: ServeDeps, states?: RunState[]): Promise<RunRow[]> {
  const runs = await deps.store.listRuns(states?.length ? { states } : {});
  const now = (deps.now ?? Date.now)();
  // One read of the cost samples for every listed run, not one per row.
  const samples = runs.length ? await deps.store.sumCost({ runIds: runs.map((r) => r.id) }) : [];
  const rows = await Promise.all(
    runs.map(async (run) => ({
      run,
      owner: await deps.ownerLine(run),
      needsPerson: NEEDS_A_PERSON.includes(run.state),
      durationMs: (FINAL.includes(run.state) ? run.updatedAt : now) - run.createdAt,
      acceptance: await acceptanceOf(deps.store, run),
      cost: await costOfRun(deps.store, run, samples, now),
    })),
  );
  return rows.sort((a, b) => Number(b.needsPerson) - Number(a.needsPerson) || b.run.createdAt - a.run.createdAt);
}

/** The runs list (the live part of `/`). */
export function runsFragment(rows: RunRow[], state: string | undefined): SafeHtml {
  const states = ['awaiting_approval', 'needs_reconciliation', 'running', 'completed', 'failed', 'cancelled'];
  return html`<section><h2>Runs</h2>
<p>filter: <a href="/">all</a> ${states.map((s) => html`· <a href="/?state=${s}">${s}</a> `)}${state ? html` — showing <strong>${state}</strong>` : ''}</p>
${rows.length === 0
    ? html`<p class="muted">no runs${state ? ` in ${state}` : ''}</p>`
    : html`<table id="runs"><thead><tr><th>run</th><th>kind</th><th>state</th><th>host / owner</th><th>started</th><th>duration</th><th>acceptance</th><th>cost</th></tr></thead><tbody>
${rows.map(
  (r) => html`<tr class="${r.needsPerson ? 'attention' : ''}" data-run="${r.run.id}"><td><a href="/runs/${r.run.id}">${r.run.id}</a></td><td>${r.run.kind}</td><td>${stateBadge(r.run.state)}</td><td>${r.owner}</td><td>${when(r.run.createdAt)}</td><td>${duration(r.durationMs)}</td><td class="acceptance">${r.acceptance.state === 'none' ? '—' : r.acceptance.state}</td><td class="cost">${costLine(r.cost)}</td></tr>`,
)}</tbody></table>`}</section>`;
}

/** The runs list's cost cell: tokens, sandbox CPU and lease time. */
export function costLine(c: RunCost): string {
  const tokens = Object.values(c.tokens).reduce((n, t) => n + t.prompt + t.completion, 0);
  return `${tokens ? `${tokens} tokens · ` : ''}${c.cpuSeconds.toFixed(2)} CPU-s · lease ${c.leaseSeconds.toFixed(0)} s`;
}
