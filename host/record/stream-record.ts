import { closeSync, openSync, renameSync, rmSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { BerthError } from '../errors';
import type { CommitRecord, Entry, Run, RunTransition, Snapshot, Task } from '../model';
import { isUnresolvedEffect } from '../model';
import { pagesOf, type Page, type Store } from '../store';
import { commitOf, effect, entry, readRunRows, recordDocument, snapshotHistory, task, type RunLists, type RunRows } from './build-record';
import { canonicalJson } from './canonical';
import { StreamedArray, writeSealedRecord } from './canonical-stream';
import { contractFields, type HandlerPolicies } from './contract-fields';
import { collectIfGrown } from '../support/heap-bound';
import { contractSections } from './sections';
import { removeStalePartials } from './stale-partials';
import { faultAside } from '../support/faults';

/** Rows per page; entries are read in smaller pages (an agent's entry bodies can be large). */
const PAGE = 200;
const ENTRY_PAGE = 64;

/**
 * The heap's slack while an export reads: a page of a long run's effects or tasks is 2-3 MB of
 * rows of which the export keeps almost nothing, so a small slack keeps the process near its live
 * data (a 3,000-step export peaked at 131 MB RSS with the process's 16 MB, ~10 MB less with 4 MB,
 * at ~0.5 s more of collections; bench/RESULTS.md session 18).
 */
const EXPORT_SLACK_MB = 4;
const bound = () => collectIfGrown(EXPORT_SLACK_MB);

/** Pages of a list read by offset until a short page, the heap bounded before each. */
const scan = <T>(read: (page: Page) => Promise<T[]>, size: number) => pagesOf(read, size, bound);

/** Pages of the first `total` rows of a list (what the first pass saw: a running run may have added more since). */
async function* firstRows<T>(read: (page: Page) => Promise<T[]>, total: number, size: number): AsyncGenerator<T[]> {
  for (let offset = 0; offset < total; offset += size) {
    bound();
    const rows = await read({ offset, limit: Math.min(size, total - offset) });
    if (rows.length === 0) return;
    yield rows;
  }
}

/** Pages of a list keyed by a growing sequence number, up to `last` included. */
async function* bySeq<T extends { seq: number }>(read: (after: number, limit: number) => Promise<T[]>, last: number, size: number): AsyncGenerator<T[]> {
  for (let after = 0; after < last; ) {
    bound();
    const rows = (await read(after, size)).filter((r) => r.seq <= last);
    if (rows.length === 0) return;
    yield rows;
    after = rows.at(-1)!.seq;
  }
}

const APPROVAL_KINDS = new Set(['agent.approval.requested', 'agent.approval.decided']);

/** What the first pass learnt of the lists it did not keep: how far to read them again. */
interface Seen {
  tasks: number;
  effects: number;
  snapshots: number;
  history: Snapshot[];
  lastEntrySeq: number;
  lastCommitSeq: number;
  costSamples: number;
}

/**
 * The lists read page by page, keeping only the rows the derived sections of the record look at:
 * the root task, every task a recovery or unresolved section names, and for each task kind the
 * first task of it (overall and at each transition: the kinds' order in handler kinds and
 * transition versions); unresolved effects; approval entries and one model entry per model; the
 * take-over commits and the last. Every section built from these equals the one built from the
 * whole lists, except the lists themselves, which the writer streams (the test holds the two exports
 * equal byte for byte).
 */
function keptLists(store: Store, seen: Seen, size: { rows: number; entries: number }): RunLists {
  return {
    async tasks(run: Run, transitions: RunTransition[]) {
      const kept: Task[] = [];
      const kinds = new Set<string>();
      const atTransition = transitions.map(() => new Set<string>());
      for await (const page of scan((p) => store.listTasks({ runId: run.id, page: p }), size.rows)) {
        for (const t of page) {
          seen.tasks++;
          const k = `${t.kind}@${t.kindVersion}`;
          const r = t.result;
          let keep = t.id === run.rootTaskId || !!t.blockedReason || t.outcome === 'interrupted' || t.restarts > 0 || (r !== null && typeof r === 'object' && !Array.isArray(r) && 'cancelled' in r);
          if (!kinds.has(k)) (kinds.add(k), (keep = true));
          transitions.forEach((tr, i) => {
            if (t.createdAt <= tr.at && !atTransition[i]!.has(k)) (atTransition[i]!.add(k), (keep = true));
          });
          if (keep) kept.push(t);
        }
      }
      return kept;
    },
    async effects(run: Run) {
      const kept = [];
      for await (const page of scan((p) => store.listEffects({ runId: run.id, earlier: true, page: p }), size.rows)) {
        seen.effects += page.length;
        kept.push(...page.filter((e) => isUnresolvedEffect(e.status)));
      }
      return kept;
    },
    async snapshots(run: Run) {
      const ids = new Set<string>();
      const parents: string[] = [];
      for await (const page of scan((p) => store.listSnapshots(run.kind !== 'agent' ? { runId: run.id, page: p } : { sessionId: run.sessionId, page: p }), size.rows)) {
        seen.snapshots += page.length;
        for (const s of page) (ids.add(s.id), s.parentId && parents.push(s.parentId));
      }
      // A parent that is one of the run's own snapshots adds nothing to the history: leaving it out keeps the walk's order.
      seen.history = await snapshotHistory(store, run, ids, parents.filter((p) => !ids.has(p)));
      return [];
    },
    async entries(run: Run) {
      const kept: Entry[] = [];
      const models = new Set<string>();
      for await (const page of bySeq((after, limit) => store.listEntries(run.sessionId, { runId: run.id, afterSeq: after, limit }), Infinity, size.entries)) {
        for (const e of page) {
          seen.lastEntrySeq = e.seq;
          const model = e.kind === 'agent.model' ? (e.body as { model?: unknown } | null)?.model : undefined;
          if (APPROVAL_KINDS.has(e.kind)) kept.push(e);
          else if (typeof model === 'string' && !models.has(model)) (models.add(model), kept.push(e));
        }
      }
      return kept;
    },
    async commits(run: Run) {
      const kept: CommitRecord[] = [];
      let last: CommitRecord | undefined;
      for await (const page of bySeq((after, limit) => store.listCommits(run.sessionId, after, limit), Infinity, size.rows)) {
        for (const c of page) if (c.label === 'run.take-over') kept.push(c);
        last = page.at(-1);
      }
      seen.lastCommitSeq = last?.seq ?? 0;
      return last && kept.at(-1) !== last ? [...kept, last] : kept;
    },
    async costSamples(run: Run) {
      // No derived section reads the samples (the summary sums them in the store): only counted.
      for await (const page of scan((p) => store.listCost({ runId: run.id, page: p }), size.rows)) seen.costSamples += page.length;
      return [];
    },
  };
}

/** A streamed array of the canonical texts of a mapping over pages of rows. */
const streamed = <T>(pages: () => AsyncIterable<T[]>, texts: (page: T[]) => string[]) =>
  new StreamedArray(async function* () {
    for await (const page of pages()) yield* texts(page);
  });

/**
 * `berth export` in bounded memory: the run's record written to `file` while its rows are read
 * page by page, the digest computed on the way. The bytes equal `exportRun`'s text for the same
 * rows. A first pass reads the lists for the sections derived from them (keeping only the rows
 * those look at), a second writes the lists themselves, as far as the first pass saw them.
 */
export async function exportRunToFile(store: Store, runId: string, now: number, file: string, o: ExportOptions = {}): Promise<{ digest: string; bytes: number }> {
  // Opened before any row is read: a destination that cannot be written is said at once, by its path.
  // Written beside the file and renamed over it: a failed or cancelled export leaves no half record.
  const partial = `${file}.partial-${process.pid}`;
  // An earlier export to this file killed before its rename left its half record: removed here.
  removeStalePartials(dirname(file), `${basename(file)}.partial-`);
  const unwritable = (e: NodeJS.ErrnoException) => {
    const why = e.code === 'ENOENT' ? `its directory ${dirname(file)} does not exist` : e.code === 'EACCES' || e.code === 'EPERM' ? `no permission to write in ${dirname(file)}` : e.code === 'EISDIR' ? `it is a directory; name a file, such as ${join(file, `${runId}.json`)}` : e.message;
    return new BerthError('output_unwritable', `cannot write the record to ${file}: ${why}`, { ids: { runId }, details: { file, errno: e.code ?? null } });
  };
  // A directory is found before the record is written: the rename over it would fail only at the end.
  if (statSync(file, { throwIfNoEntry: false })?.isDirectory()) throw unwritable(Object.assign(new Error('is a directory'), { code: 'EISDIR' }));
  let fd: number | undefined;
  try {
    fd = openSync(partial, 'w');
  } catch (err) {
    throw unwritable(err as NodeJS.ErrnoException);
  }
  try {
    const written = await writeRecord(store, runId, now, fd, o);
    closeSync(fd);
    fd = undefined;
    faultAside('export:written');
    try {
      renameSync(partial, file);
    } catch (err) {
      throw unwritable(err as NodeJS.ErrnoException);
    }
    return written;
  } catch (err) {
    // Closed once: a second close would throw EBADF over the error that brought us here.
    if (fd !== undefined) closeSync(fd);
    rmSync(partial, { force: true });
    throw err;
  }
}

interface ExportOptions {
  policies?: HandlerPolicies;
  signal?: AbortSignal;
  pageRows?: number;
}

async function writeRecord(store: Store, runId: string, now: number, fd: number, o: ExportOptions): Promise<{ digest: string; bytes: number }> {
  // `pageRows`: smaller pages, so a test's short run crosses page boundaries in every list.
  const size = { rows: o.pageRows ?? PAGE, entries: o.pageRows ?? ENTRY_PAGE };
  const seen: Seen = { tasks: 0, effects: 0, snapshots: 0, history: [], lastEntrySeq: 0, lastCommitSeq: 0, costSamples: 0 };
  const rows = await readRunRows(store, runId, now, { lists: keptLists(store, seen, size) });
  const { run } = rows;
  o.signal?.throwIfAborted();
  const { doc } = recordDocument(rows, now, o);
  const with_ = (part: Partial<RunRows>): RunRows => ({ ...rows, ...part });

  const tasks = () => firstRows((p) => store.listTasks({ runId, page: p }), seen.tasks, size.rows);
  const effects = () => firstRows((p) => store.listEffects({ runId, earlier: true, page: p }), seen.effects, size.rows);
  const snapshots = async function* () {
    if (seen.history.length) yield seen.history;
    yield* firstRows((p) => store.listSnapshots(run.kind !== 'agent' ? { runId, page: p } : { sessionId: run.sessionId, page: p }), seen.snapshots, size.rows);
  };
  const entries = () => bySeq((after, limit) => store.listEntries(run.sessionId, { runId, afterSeq: after, limit }), seen.lastEntrySeq, size.entries);
  const commits = () => bySeq((after, limit) => store.listCommits(run.sessionId, after, limit), seen.lastCommitSeq, size.rows);
  const costSamples = () => firstRows((p) => store.listCost({ runId, page: p }), seen.costSamples, size.rows);
  // The per-row sections come from the same functions as the whole export's, given one page at a time.
  const texts = <T>(rowsOf: T[]) => rowsOf.map((v) => canonicalJson(v));
  const contract = doc.contract!;
  const streamedDoc = {
    ...doc,
    tasks: streamed(tasks, (page) => texts(page.map(task))),
    effects: streamed(effects, (page) => texts(page.map(effect))),
    entries: streamed(entries, (page) => page.map((e) => entry(e).text)),
    commits: streamed(commits, (page) => texts(page.map(commitOf))),
    cost: { ...doc.cost, samples: streamed(costSamples, (page) => texts(contractSections(with_({ costSamples: page })).cost.samples)) },
    retryAndTimeout: { ...doc.retryAndTimeout, taskAttempts: streamed(tasks, (page) => texts(contractSections(with_({ tasks: page })).retryAndTimeout.taskAttempts)) },
    isolation: { ...doc.isolation, snapshots: streamed(snapshots, (page) => texts(contractSections(with_({ snapshots: page })).isolation.snapshots)) },
    contract: {
      ...contract,
      effectAttempts: streamed(effects, (page) => texts(contractFields(with_({ effects: page }), o.policies).effectAttempts)),
      retention: {
        ...contract.retention,
        deletions: streamed(
          async function* () {
            yield* snapshots();
            yield [];
          },
          // The snapshots' deletions page by page, then the leases' (one page: the empty one after the snapshots).
          (page) => texts(contractFields(page.length ? with_({ snapshots: page, leases: [] }) : with_({ snapshots: [] }), o.policies).retention.deletions),
        ),
      },
    },
  };
  return writeSealedRecord(streamedDoc as unknown as Record<string, unknown>, fd, o.signal);
}
