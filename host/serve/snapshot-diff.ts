import type { Snapshot } from '../model';
import type { Store } from '../store';
import { html, nameText, type SafeHtml } from './html';
import { when } from './layout';
import { asText, lineDiff, type DiffLine } from './text-diff';

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

/** A changed regular file's text diff, or why none is shown. */
export type TextChange = { path: string; lines: DiffLine[] } | { path: string; none: string };

/** Reads files of a snapshot image by content digest (host/sandbox `readImageFilesByDigest`, bound to the engine). */
export type ImageFileReader = (imageId: string, sha256s: string[], o: { maxBytes: number; signal?: AbortSignal }) => Promise<{ found: Map<string, Buffer>; tooLarge: Set<string> }>;

/** Files larger than this get no text diff; at most this many files get one per page. */
export const TEXT_DIFF_MAX_BYTES = 64 * 1024;
export const TEXT_DIFF_MAX_FILES = 20;

const shaOf = (v: string | null) => (v?.startsWith('f:') ? (v.split(':')[2] ?? null) : null);

/** Both snapshots of the run and their manifests (cached per image by the snapshotter), or why a diff cannot be shown. */
export async function readSnapshotDiff(store: Store, runId: string, fromId: string, toId: string, o: { files?: ImageFileReader; signal?: AbortSignal } = {}): Promise<{ from: Snapshot; to: Snapshot; changes: PathChange[]; texts: TextChange[] } | { refused: string }> {
  const snaps = await store.listSnapshots({ runId });
  const from = snaps.find((s) => s.id === fromId);
  const to = snaps.find((s) => s.id === toId);
  if (!from || !to) return { refused: `run ${runId} has no snapshot ${!from ? fromId : toId}` };
  const [a, b] = await Promise.all([store.getWorkspaceManifest(from.imageId), store.getWorkspaceManifest(to.imageId)]);
  if (!isManifest(a) || !isManifest(b)) return { refused: `no workspace manifest is recorded for snapshot ${!isManifest(a) ? from.id : to.id} (its image was not scanned by this store)` };
  const changes = diffManifests(a, b);
  return { from, to, changes, texts: await textChanges(changes, from, to, o) };
}

/**
 * Text diffs of the first changed regular files, from the two snapshot images' contents (read on
 * the host by digest, no sandbox): a file past the size cap, a binary one, or one the engine no
 * longer has is said so instead.
 */
async function textChanges(changes: PathChange[], from: Snapshot, to: Snapshot, o: { files?: ImageFileReader; signal?: AbortSignal }): Promise<TextChange[]> {
  const files = changes.filter((c) => shaOf(c.before) !== null || shaOf(c.after) !== null).slice(0, TEXT_DIFF_MAX_FILES);
  if (files.length === 0) return [];
  if (!o.files) return files.map((c) => ({ path: c.path, none: 'no engine to read the snapshot images from' }));
  const read = async (imageId: string, shas: string[]) => {
    try {
      return await o.files!(imageId, [...new Set(shas)], { maxBytes: TEXT_DIFF_MAX_BYTES, signal: o.signal });
    } catch (err) {
      return { failed: err instanceof Error ? err.message : String(err) };
    }
  };
  const [before, after] = await Promise.all([
    read(from.imageId, files.flatMap((c) => shaOf(c.before) ?? [])),
    read(to.imageId, files.flatMap((c) => shaOf(c.after) ?? [])),
  ]);
  const side = (got: typeof before, sha: string | null): string | { none: string } => {
    if (sha === null) return '';
    if ('failed' in got) return { none: `the snapshot image could not be read (${got.failed})` };
    if (got.tooLarge.has(sha)) return { none: `larger than ${TEXT_DIFF_MAX_BYTES / 1024} KiB` };
    const bytes = got.found.get(sha);
    if (!bytes) return { none: 'its content is not in the snapshot image (larger than 8 MiB, or the image was pruned)' };
    const text = asText(bytes);
    return text === 'binary' ? { none: 'binary' } : text;
  };
  return files.map((c) => {
    const x = side(before, shaOf(c.before));
    const y = side(after, shaOf(c.after));
    if (typeof x !== 'string') return { path: c.path, none: x.none };
    if (typeof y !== 'string') return { path: c.path, none: y.none };
    const lines = lineDiff(x, y);
    return lines === 'too-large' ? { path: c.path, none: 'too many changed lines to show' } : { path: c.path, lines };
  });
}

/** One file's text diff: every line is text (escaped), its operation a class. */
function textFragment(t: TextChange): SafeHtml {
  if ('none' in t) return html`<div class="textdiff" data-path="${t.path}" data-none="1"><h3><code>${nameText(t.path)}</code></h3><p class="muted">no text diff: ${t.none}</p></div>`;
  const line = (l: DiffLine) => (l.op === 'gap' ? html`<span class="gap">… ${l.lines} unchanged line${l.lines === 1 ? '' : 's'}\n</span>` : html`<span class="${l.op === '+' ? 'add' : l.op === '-' ? 'del' : 'ctx'}">${l.op}${l.text}\n</span>`);
  return html`<div class="textdiff" data-path="${t.path}"><h3><code>${nameText(t.path)}</code></h3><pre>${t.lines.map(line)}</pre></div>`;
}

const what = (v: string | null) => {
  if (v === null) return '—';
  const [kind, ...rest] = v.split(':');
  if (kind === 'f') return `file, mode ${rest[0]}, sha256 ${(rest[1] ?? '').slice(0, 12)}`;
  if (kind === 'd') return `directory, mode ${rest[0]}`;
  if (kind === 'l') return html`symlink to ${nameText(rest.join(':'))}`;
  return `other, mode ${rest[0]}`;
};

/** The diff page's body: counts, then each changed path with what it was and what it became. */
export function diffFragment(runId: string, d: Awaited<ReturnType<typeof readSnapshotDiff>>): SafeHtml {
  if ('refused' in d) return html`<section id="diff"><h2>Workspace diff</h2><p class="attention">${d.refused}</p><p><a href="/runs/${runId}">back to the run</a></p></section>`;
  const count = (c: PathChange['change']) => d.changes.filter((x) => x.change === c).length;
  return html`<section id="diff"><h2>Workspace diff of run <a href="/runs/${runId}"><code>${runId}</code></a></h2>
<p>from <code>${d.from.id}</code> (${nameText(d.from.checkpoint)}, ${when(d.from.createdAt)}) to <code>${d.to.id}</code> (${nameText(d.to.checkpoint)}, ${when(d.to.createdAt)}):
<strong class="added">${count('added')} added</strong>, <strong class="changed">${count('changed')} changed</strong>, <strong class="removed">${count('removed')} removed</strong></p>
${d.changes.length === 0 ? html`<p class="muted">the two workspaces are the same</p>` : html`<table><thead><tr><th>path</th><th>change</th><th>before</th><th>after</th></tr></thead><tbody>${d.changes.map(
    (c) => html`<tr data-path="${c.path}" data-change="${c.change}"><td><code>${nameText(c.path)}</code></td><td>${c.change}</td><td>${what(c.before)}</td><td>${what(c.after)}</td></tr>`,
  )}</tbody></table>`}
${d.texts.length ? html`<h2 id="texts">Text changes${d.texts.length === TEXT_DIFF_MAX_FILES ? html` <span class="muted">(the first ${TEXT_DIFF_MAX_FILES} files)</span>` : ''}</h2>${d.texts.map(textFragment)}` : ''}</section>`;
}

/** A GET form choosing two of the run's snapshots to compare. */
export function diffForm(runId: string, snaps: readonly Snapshot[]): SafeHtml {
  if (snaps.length < 2) return html``;
  const options = (selected: string) => snaps.map((s) => html`<option value="${s.id}"${s.id === selected ? html` selected` : ''}>${nameText(s.checkpoint)} (${s.id})</option>`);
  return html`<section id="compare"><h2>Compare workspaces</h2><form id="diff-form" method="get" action="/runs/${runId}/diff">what changed from <select name="from">${options(snaps[snaps.length - 2]!.id)}</select> to <select name="to">${options(snaps[snaps.length - 1]!.id)}</select> <button type="submit">diff</button></form></section>`;
}
