import { sessionSandboxDocId } from '../agent';
import { BerthError } from '../errors';
import { isOperatorReceipt } from '../kernel';
import type { CommitRecord, Effect, Entry, Json, Run, RunTransition, Snapshot, Task } from '../model';
import type { Store } from '../store';
import { KERNEL } from '../version';
import { forkedFrom } from '../fork';
import { costOfRun } from '../cost';
import { sealRecord, sha256, canonicalJson } from './canonical';
import { contractSections } from './sections';
import { contractFields, type HandlerPolicies } from './contract-fields';
import { RECORD_FORMAT, RECORD_SCHEMA_VERSION, type RunRecord } from './schema';
import { runNotFound } from '../store/missing-run';

/** Entry bodies, submissions and similar values above this many bytes are referenced by digest, never inlined. */
export const INLINE_LIMIT = 16 * 1024;

/** A value, or its digest and size when its canonical JSON is larger than {@link INLINE_LIMIT}. */
export function inlineOrDigest(value: Json): Json {
  // The native serialiser sizes it (same length as the canonical form: only key order differs);
  // the canonical form is computed only for a value that is left out and so needs its digest.
  if (JSON.stringify(value).length <= INLINE_LIMIT) return value;
  const text = canonicalJson(value);
  return { omitted: true, digest: sha256(text), bytes: Buffer.byteLength(text) };
}

export const task = (t: Task): RunRecord['tasks'][number] => ({
  id: t.id, parentId: t.parentId, kind: t.kind, kindVersion: t.kindVersion, status: t.status, phase: t.phase,
  checkpoint: t.checkpoint, input: t.input, attempts: t.attempts, restarts: t.restarts, wait: t.wait, wakeAt: t.wakeAt,
  outcome: t.outcome, result: t.result, error: t.error, cancelRequested: t.cancelRequested, blockedReason: t.blockedReason,
  version: t.version, createdAt: t.createdAt, updatedAt: t.updatedAt,
});

/** How the outside world's answer to an effect is known, or can be learnt: from how its newest attempt was settled. */
function reconciliationOf(e: Effect): RunRecord['effects'][number]['reconciliation'] {
  const how = e.attemptLog.at(-1)?.settledBy;
  if (e.status === 'confirmed' || e.status === 'compensated' || e.status === 'failed') {
    if (how === 'status_query') return 'verify_query';
    if (how === 'operator' || how === 'restore' || isOperatorReceipt(e.receipt)) return 'operator_decision';
    return e.status === 'failed' ? 'none' : 'receipt';
  }
  return e.replay === 'verify' ? 'verify_query' : 'pending';
}

export const effect = (e: Effect): RunRecord['effects'][number] => ({
  id: e.id, taskId: e.taskId, kind: e.kind, intent: e.intent, replay: e.replay, status: e.status, attempts: e.attempts, attemptLog: e.attemptLog, runId: e.runId,
  receipt: e.receipt, error: e.error, createdAt: e.createdAt, updatedAt: e.updatedAt, reconciliation: reconciliationOf(e),
});

/**
 * One entry of the record and its canonical text, built together: the body is serialised once,
 * to size it (a large one is left out by digest) and as part of the text.
 */
export function entry(e: Entry): { value: RunRecord['entries'][number]; text: string } {
  let bodyText = canonicalJson(e.body);
  let body: Json = e.body;
  if (bodyText.length > INLINE_LIMIT) {
    body = { omitted: true, digest: sha256(bodyText), bytes: Buffer.byteLength(bodyText) };
    bodyText = canonicalJson(body);
  }
  const s = JSON.stringify;
  // Keys in sorted order: at, body, commitSeq, conversationId, id, kind, seq, taskId.
  const text = `{"at":${s(e.at)},"body":${bodyText},"commitSeq":${s(e.commitSeq)},"conversationId":${s(e.conversationId)},"id":${s(e.id)},"kind":${s(e.kind)},"seq":${s(e.seq)},"taskId":${s(e.taskId)}}`;
  return { value: entryValue(e, body), text };
}

const entryValue = (e: Entry, body: Json = e.body): RunRecord['entries'][number] => ({ id: e.id, seq: e.seq, conversationId: e.conversationId, taskId: e.taskId, kind: e.kind, body, commitSeq: e.commitSeq, at: e.at });

/**
 * How the lists that grow with a run's length are read: whole (here), or scanned page by page
 * keeping only the rows the derived sections look at (stream-record.ts).
 */
export interface RunLists {
  tasks(run: Run, transitions: RunTransition[]): Promise<Task[]>;
  effects(run: Run): Promise<Effect[]>;
  snapshots(run: Run): Promise<Snapshot[]>;
  entries(run: Run): Promise<Entry[]>;
  commits(run: Run): Promise<CommitRecord[]>;
  costSamples(run: Run): Promise<Awaited<ReturnType<Store['listCost']>>>;
}

const wholeLists = (store: Store): RunLists => ({
  tasks: (run) => store.listTasks({ runId: run.id }),
  effects: (run) => store.listEffects({ runId: run.id, earlier: true }),
  snapshots: (run) => runSnapshots(store, run),
  entries: (run) => store.listEntries(run.sessionId, { runId: run.id }),
  commits: (run) => store.listCommits(run.sessionId),
  costSamples: (run) => store.listCost({ runId: run.id }),
});

/**
 * Everything the store holds about one run, read in one pass. `for: 'check'` leaves out what no
 * invariant reads (the submission, egress, cost, artifacts, owner, fork origin, import mark, store
 * id: half of the reads): those members are empty. An invariant that comes to read one of them
 * must have it read here for the check too.
 */
export async function readRunRows(store: Store, runId: string, now = Date.now(), o: { for?: 'export' | 'check'; lists?: RunLists } = {}) {
  const lists = o.lists ?? wholeLists(store);
  const run = await store.getRun(runId);
  if (!run) throw await runNotFound(store, runId);
  const all = o.for !== 'check';
  const transitions = await store.listRunTransitions(runId);
  const [session, submission, tasks, effects, snapshots, leases, documents, entries, egress, commits, imported, storeId] = await Promise.all([
    store.getSession(run.sessionId),
    all && run.submissionId ? store.getSubmission(run.submissionId) : Promise.resolve(undefined),
    lists.tasks(run, transitions),
    lists.effects(run),
    lists.snapshots(run),
    // The leases `berth show` lists: the run's, its agent session's, and pool leases of the session.
    store.listLeases({ sessionId: run.sessionId }).then((ls) => ls.filter((l) => l.runId === null || l.runId === runId || l.runId === run.sessionId)),
    sandboxDocuments(store, run),
    lists.entries(run),
    all ? store.listEgress({ runId }) : none<Store['listEgress']>([]),
    lists.commits(run),
    all ? store.getImportedRun(runId) : none<Store['getImportedRun']>(undefined),
    all ? store.storeId() : '',
  ]);
  const [acceptance, costSamples, artifacts, owner, costTotals] = await Promise.all([
    store.listAcceptance({ runId }),
    all ? lists.costSamples(run) : none<Store['listCost']>([]),
    all ? store.listArtifacts(runId) : none<Store['listArtifacts']>([]),
    all ? store.getSessionOwner(run.sessionId) : none<Store['getSessionOwner']>(undefined),
    all ? store.sumCost({ runIds: [runId] }) : undefined,
  ]);
  if (!session) throw new BerthError('record_incomplete', `run ${runId} names session ${run.sessionId}, which the store does not hold`, { ids: { runId } });
  return {
    run, session, submission, transitions, tasks, effects, snapshots, leases, documents, entries, egress, commits, imported, storeId,
    forkedFrom: all ? await forkedFrom(store, run) : null,
    // An imported run is never owned here: its owner is the one its record named.
    acceptance, costSamples, artifacts, owner: imported ? imported.owner ?? undefined : owner,
    // What `berth show` prints, at the export's moment (open leases and kept snapshots count until then).
    costSummary: all ? await costOfRun(store, run, costTotals!, now) : (null as unknown as Awaited<ReturnType<typeof costOfRun>>),
  };
}

/** What a read left out for the check gives instead. */
const none = <F extends (...args: never[]) => Promise<unknown>>(v: Awaited<ReturnType<F>>): Promise<Awaited<ReturnType<F>>> => Promise.resolve(v);
export type RunRows = Awaited<ReturnType<typeof readRunRows>>;

/**
 * The run's snapshots, and for an agent run every snapshot of its session: the session keeps one
 * sandbox across runs, so a later run restores (and its pointer names) snapshots an earlier one took.
 */
async function runSnapshots(store: Store, run: Run) {
  const own = run.kind !== 'agent' ? await store.listSnapshots({ runId: run.id }) : await store.listSnapshots({ sessionId: run.sessionId });
  return [...(await snapshotHistory(store, run, new Set(own.map((s) => s.id)), own.map((s) => s.parentId))), ...own];
}

/**
 * The snapshots before a run's own (given by their ids and parents) that the record carries, oldest
 * first: a fork starts from (and its first snapshot names as parent) a snapshot of the run it was
 * forked from; that snapshot's own parents are the history it holds.
 */
export async function snapshotHistory(store: Store, run: Run, ownIds: Set<string>, ownParents: Array<string | null>): Promise<Snapshot[]> {
  const from = await forkedFrom(store, run);
  const have = new Set(ownIds);
  const extra: Snapshot[] = [];
  const queue = [...ownParents, from?.snapshotId ?? null];
  while (queue.length) {
    const id = queue.shift();
    if (!id || have.has(id)) continue;
    const s = await store.getSnapshot(id);
    if (!s) continue;
    have.add(id);
    extra.unshift(s);
    queue.push(s.parentId);
  }
  return extra;
}

/** The run's documents, and its agent session's sandbox pointer (which `berth show` reads too). */
async function sandboxDocuments(store: Store, run: Run) {
  const own = await store.listDocuments({ runId: run.id });
  const session = own.some((d) => d.id === sessionSandboxDocId(run.sessionId)) ? undefined : await store.getDocument(sessionSandboxDocId(run.sessionId));
  return session ? [...own, session] : own;
}

/**
 * The run's record (seed 004's Agent Run Contract over Berth's records), sealed: `text` is the
 * canonical JSON written to the file, `record` the same document as a value.
 */
export async function exportRun(store: Store, runId: string, now: number, o: { policies?: HandlerPolicies } = {}): Promise<{ record: RunRecord; text: string }> {
  const { doc, entryTexts } = recordDocument(await readRunRows(store, runId, now), now, o);
  const { text, digest } = sealRecord(doc as Record<string, unknown>, { entries: `[${entryTexts.join(',')}]` });
  return { record: { ...doc, digest } as RunRecord, text };
}

/**
 * The record as `berth check` judges it: the same document, without the canonical text, the digest
 * and the members no invariant reads (see readRunRows; together over half of a check's time).
 */
export async function recordToCheck(store: Store, runId: string, now: number): Promise<RunRecord> {
  const rows = await readRunRows(store, runId, now, { for: 'check' });
  return { ...recordDocument(rows, now, { texts: false }).doc, digest: '' } as RunRecord;
}

/** A commit as the record lists it. */
export const commitOf = ({ sessionId: _s, ...c }: CommitRecord) => c;

/**
 * The record's document (everything but its digest) from the rows read, and each entry's canonical
 * text (serialised once, as the entries member's text). `berth export`'s streamed writer builds the
 * same document from the run's rows in pages (stream-record.ts).
 */
export function recordDocument(rows: RunRows, now: number, o: { policies?: HandlerPolicies; texts?: boolean } = {}): { doc: Omit<RunRecord, 'digest'>; entryTexts: string[] } {
  const { run, session, submission } = rows;
  const sections = contractSections(rows);
  // `berth check` needs no canonical text: serialising every entry body was a large share of its time.
  const entries = o.texts === false ? rows.entries.map((e) => ({ value: entryValue(e), text: '' })) : rows.entries.map(entry);
  const doc: Omit<RunRecord, 'digest'> = {
    format: RECORD_FORMAT,
    schemaVersion: RECORD_SCHEMA_VERSION,
    exportedAt: now,
    source: { storeId: rows.storeId, berth: `${KERNEL.name} ${KERNEL.version}`, importedFrom: rows.imported?.source ?? null },
    ...sections,
    run: {
      id: run.id, sessionId: run.sessionId, sessionCreatedAt: session.createdAt, sessionMeta: session.meta, kind: run.kind, state: run.state,
      rootTaskId: run.rootTaskId, parentRunId: rows.forkedFrom?.runId ?? null, forkedFrom: rows.forkedFrom ?? { recorded: false, note: 'not a fork' },
      transitionCount: run.transitionCount, versions: run.versions,
      handlerKinds: [...new Map(rows.tasks.map((t) => [`${t.kind}@${t.kindVersion}`, { kind: t.kind, version: t.kindVersion }])).values()],
      ...modelOf(rows),
      createdAt: run.createdAt, updatedAt: run.updatedAt,
    },
    transitions: rows.transitions.map(({ runId: _r, ...t }) => t),
    commits: rows.commits.map(commitOf),
    tasks: rows.tasks.map(task),
    effects: rows.effects.map(effect),
    documents: rows.documents.map(({ sessionId: _s, ...d }) => d),
    entries: entries.map((e) => e.value),
    egress: rows.egress.map(({ runId: _r, ...a }) => ({ ...a, count: a.count ?? 1 })),
    job: { ...sections.job, submission: submission ? inlineOrDigest(submission.input) : null },
    contract: contractFields(rows, o.policies),
  };
  return { doc, entryTexts: entries.map((e) => e.text) };
}

/** The models an agent run called (from its model entries) and the digest of its system prompt. */
function modelOf(rows: RunRows): { models: string[]; promptDigest: string | null } {
  const models = new Set<string>();
  for (const e of rows.entries) {
    const b = e.body as { model?: unknown } | null;
    if (e.kind === 'agent.model' && b && typeof b.model === 'string') models.add(b.model);
  }
  const root = rows.tasks.find((t) => t.id === rows.run.rootTaskId);
  const settings = (root?.input as { settings?: { systemPrompt?: unknown; model?: { model?: unknown } } } | null)?.settings;
  if (typeof settings?.model?.model === 'string' && models.size === 0) models.add(settings.model.model);
  return { models: [...models].sort(), promptDigest: typeof settings?.systemPrompt === 'string' ? sha256(settings.systemPrompt) : null };
}
