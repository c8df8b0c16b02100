import type { Snapshot } from '../model';
import type { Store } from '../store';
import { html, type SafeHtml } from './html';
import { when } from './layout';

/** One path that differs between two workspace manifests (host/snapshot manifest.ts: `f:mode:sha`, `d:mode`, `l:target`, `o:mode`). */
export interface PathChange {
  path: string;
  change: 'added' | 'changed' | 'removed';
  before: string | null;
  after: string | null;
}

/** What differs between two manifests, by path (byte order); equal entries are left out. */
export function diffManifests(before: Record<string, string>, after: Record<string, string>): PathChange[] {
  const paths = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const out: PathChange[] = [];
  for (const path of paths) {
    const b = before[path] ?? null;
    const a = after[path] ?? null;
    if (b === a) continue;
    out.push({ path, change: b === null ? 'added' : a === null ? 'removed' : 'changed', before: b, after: a });
  }
  return out;
}

const isManifest = (v: unknown): v is Record<string, string> => !!v && typeof v === 'object' && !Array.isArray(v) && Object.values(v).every((x) => typeof x === 'string');

/** Both snapshots of the run and their manifests (cached per image by the snapshotter), or why a diff cannot be shown. */
export async function readSnapshotDiff(store: Store, runId: string, fromId: string, toId: string): Promise<{ from: Snapshot; to: Snapshot; changes: PathChange[] } | { refused: string }> {
  const snaps = await store.listSnapshots({ runId });
  const from = snaps.find((s) => s.id === fromId);
  const to = snaps.find((s) => s.id === toId);
  if (!from || !to) return { refused: `run ${runId} has no snapshot ${!from ? fromId : toId}` };
  const [a, b] = await Promise.all([store.getWorkspaceManifest(from.imageId), store.getWorkspaceManifest(to.imageId)]);
  if (!isManifest(a) || !isManifest(b)) return { refused: `no workspace manifest is recorded for snapshot ${!isManifest(a) ? from.id : to.id} (its image was not scanned by this store)` };
  return { from, to, changes: diffManifests(a, b) };
}

const what = (v: string | null) => {
  if (v === null) return '—';
  const [kind, ...rest] = v.split(':');
  if (kind === 'f') return `file, mode ${rest[0]}, sha256 ${(rest[1] ?? '').slice(0, 12)}`;
  if (kind === 'd') return `directory, mode ${rest[0]}`;
  if (kind === 'l') return `symlink to ${rest.join(':')}`;
  return `other, mode ${rest[0]}`;
};

/** The diff page's body: counts, then each changed path with what it was and what it became. */
export function diffFragment(runId: string, d: Awaited<ReturnType<typeof readSnapshotDiff>>): SafeHtml {
  if ('refused' in d) return html`<section id="diff"><h2>Workspace diff</h2><p class="attention">${d.refused}</p><p><a href="/runs/${runId}">back to the run</a></p></section>`;
  const count = (c: PathChange['change']) => d.changes.filter((x) => x.change === c).length;
  return html`<section id="diff"><h2>Workspace diff of run <a href="/runs/${runId}"><code>${runId}</code></a></h2>
<p>from <code>${d.from.id}</code> (${d.from.checkpoint}, ${when(d.from.createdAt)}) to <code>${d.to.id}</code> (${d.to.checkpoint}, ${when(d.to.createdAt)}):
<strong class="added">${count('added')} added</strong>, <strong class="changed">${count('changed')} changed</strong>, <strong class="removed">${count('removed')} removed</strong></p>
${d.changes.length === 0 ? html`<p class="muted">the two workspaces are the same</p>` : html`<table><thead><tr><th>path</th><th>change</th><th>before</th><th>after</th></tr></thead><tbody>${d.changes.map(
    (c) => html`<tr data-path="${c.path}" data-change="${c.change}"><td><code>${c.path}</code></td><td>${c.change}</td><td>${what(c.before)}</td><td>${what(c.after)}</td></tr>`,
  )}</tbody></table>`}</section>`;
}

/** A GET form choosing two of the run's snapshots to compare. */
export function diffForm(runId: string, snaps: readonly Snapshot[]): SafeHtml {
  if (snaps.length < 2) return html``;
  const options = (selected: string) => snaps.map((s) => html`<option value="${s.id}"${s.id === selected ? html` selected` : ''}>${s.checkpoint} (${s.id})</option>`);
  return html`<section id="compare"><h2>Compare workspaces</h2><form id="diff-form" method="get" action="/runs/${runId}/diff">what changed from <select name="from">${options(snaps[snaps.length - 2]!.id)}</select> to <select name="to">${options(snaps[snaps.length - 1]!.id)}</select> <button type="submit">diff</button></form></section>`;
}
