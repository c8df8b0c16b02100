import { currentArtifacts } from '../artifacts';
import { ENTRY, listApprovals, type ApprovalView, type ModelEntry } from '../agent';
import type { Entry, Json } from '../model';
import { STEP_KIND } from '../plan';
import type { RunDescription, ServeDeps } from './deps';
import { attemptsOf, attemptState, type AttemptState, type OutputPart } from '../output';
import { nameFromMeta } from '../store';
import { lineageOf, type LineageNode } from '../fork';

/** Entries per page of a run's record (newest first; older pages on demand). */
export const ENTRY_PAGE = 100;

/** Everything a run page shows; also the body of `GET /api/runs/:id`. */
export interface RunView extends RunDescription {
  owner: string;
  approvals: ApprovalView[];
  /** The newest entries (before `before` when paging), newest first. */
  entries: Entry[];
  /** The `before` of the next older page, null at the oldest. */
  olderBefore: number | null;
  steps: StepView[];
  /** Steps left out of `steps` on a long run's page: finished ones older than the tasks read, pending ones past the first few. */
  stepsNotShown?: { earlier: number; later: number };
  tokens: { prompt: number; completion: number; total: number } | null;
  /** The plan's name or the first line of the agent task (null for an unnamed run). */
  name: string | null;
  /** Why the run waits or stopped, from the transition into its state (null while it runs or when completed). */
  parkReason: string | null;
  /** The whole fork tree the run belongs to, from its oldest ancestor, every depth (null when it has no forks and no parent). */
  tree: TreeNode | null;
  /** Every attempt's live output (the end of it), steps' and tool calls'. */
  output: AttemptView[];
  /** The newest output chunk shown: the page's output events start after it. */
  outputSeq: number;
  /** The newest store-wide commit sequence when this view was read: the page's events start after it. */
  commitSeq: number;
  /** The run's artifacts as they stand (a re-run step's newer generation supersedes the older). */
  artifacts: ArtifactView[];
}

/** One artifact row; `href` streams the blob, checked against `sha256`. */
export interface ArtifactView {
  id: string;
  path: string;
  step: string;
  sizeBytes: number;
  sha256: string;
  href: string;
}

/** One execution of a step or tool call with the end of its live output (host/output). */
export interface AttemptView {
  attempt: string;
  source: string;
  label: string;
  state: AttemptState;
  end: string | null;
  startedAt: number;
  lastAt: number;
  cutBytes: number;
  /** The end of its output (at most {@link ATTEMPT_TAIL} characters), in print order. */
  parts: OutputPart[];
  /** The newest chunk shown: the page's script appends only later ones. */
  lastSeq: number;
}

/** One run of a fork tree: where it was forked from, and its own forks. */
export interface TreeNode {
  runId: string;
  state: string;
  checkpoint: string | null;
  children: TreeNode[];
}

const treeOf = (n: LineageNode): TreeNode => ({ runId: n.run.id, state: n.run.state, checkpoint: n.forkedFrom?.checkpoint ?? null, children: n.children.map(treeOf) });

/** Characters of an attempt's output a page shows (the end of it). */
export const ATTEMPT_TAIL = 16_000;

/** A plan step: its state (pending before its task exists), the output tails of its result, and its attempts' live output. */
export interface StepView {
  taskId: string | null;
  index: number | null;
  name: string;
  /** `pending`, `running`, `ok`, `error`, … */
  state: string;
  /** The task's status as recorded (with its phase), or `pending`. */
  status: string;
  startedAt: number | null;
  attempts: AttemptView[];
  exitCode: number | null;
  durationMs: number | null;
  stdoutTail: string;
  stderrTail: string;
  snapshotId: string | null;
}

const obj = (v: Json | undefined): Record<string, Json> => (v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, Json>) : {});
const str = (v: Json | undefined): string => (typeof v === 'string' ? v : '');
const num = (v: Json | undefined): number | null => (typeof v === 'number' ? v : null);

function tailParts(parts: OutputPart[]): OutputPart[] {
  let room = ATTEMPT_TAIL;
  const out: OutputPart[] = [];
  for (let i = parts.length - 1; i >= 0 && room > 0; i--) {
    const p = parts[i]!;
    out.unshift(p.text.length > room ? { channel: p.channel, text: p.text.slice(-room) } : p);
    room -= p.text.length;
  }
  return out;
}

/** Every attempt of the run with the end of its output, in the order they started. */
export function attemptViews(chunks: Parameters<typeof attemptsOf>[0], runLive: boolean): AttemptView[] {
  const all = attemptsOf(chunks);
  return all.map((a) => ({ attempt: a.attempt, source: a.source, label: a.label, state: attemptState(a, all, runLive), end: a.end, startedAt: a.startedAt, lastAt: a.lastAt, cutBytes: a.cutBytes, parts: tailParts(a.parts), lastSeq: a.lastSeq }));
}

const PARKED = new Set(['needs_reconciliation', 'awaiting_approval', 'waiting_for_input', 'retry_wait', 'failed', 'cancelled', 'compensated', 'cancelling', 'reconciling']);

/** The reason of the newest transition into the run's state, when that state waits for someone or ended it early. */
function parkReasonOf(d: RunDescription): string | null {
  if (!PARKED.has(d.run.state)) return null;
  return [...d.transitions].reverse().find((t) => t.to === d.run.state && t.from !== t.to)?.reason ?? null;
}

const LIVE_STATES = new Set(['admitted', 'running', 'retry_wait', 'waiting_for_input', 'awaiting_approval', 'cancelling', 'reconciling', 'compensating']);
export const runIsLive = (state: string) => LIVE_STATES.has(state);

/** Pending steps a run page lists after the newest started one; the rest are counted. */
const PENDING_SHOWN = 20;

/**
 * The plan's steps in order: each one's newest task (a re-run after a restore is a newer task), or
 * pending. On a page of a long run's newest tasks, the steps before the oldest task read are not
 * listed (they ran: counted in `earlier`, `berth show` and the API's pages list them), nor pending
 * ones past the first {@link PENDING_SHOWN} (counted in `later`): the page stays the same size
 * whatever the plan's length.
 */
export function stepsOf(d: RunDescription, attempts: AttemptView[]): { steps: StepView[]; notShown: { earlier: number; later: number } } {
  const root = d.tasks.find((t) => t.id === d.run.rootTaskId);
  const planSteps = obj(obj(root?.input).plan).steps;
  const names = Array.isArray(planSteps) ? planSteps.map((s) => str(obj(s).name)) : [];
  const tasks = d.tasks.filter((t) => t.kind === STEP_KIND);
  const byIndex = new Map<number, (typeof tasks)[number]>();
  for (const t of tasks) {
    const i = num(obj(t.input).index);
    if (i !== null) byIndex.set(i, t);
  }
  const views = tasks
    .filter((t) => {
      const i = num(obj(t.input).index);
      return i === null || byIndex.get(i) === t;
    })
    .map((t) => {
      const r = obj(t.outcome === 'ok' ? t.result : (t.error?.details as Json | undefined));
      const index = num(obj(t.input).index);
      return {
        taskId: t.id,
        index,
        name: str(r.step) || (index !== null ? names[index] || `step ${index + 1}` : t.id),
        state: t.status === 'terminal' ? String(t.outcome) : t.status,
        status: t.status === 'terminal' ? String(t.outcome) : `${t.status}${t.phase ? ` (${t.phase})` : ''}`,
        startedAt: t.createdAt ?? null,
        attempts: attempts.filter((a) => index !== null && a.source === `step:${index}`),
        exitCode: num(r.exitCode),
        durationMs: num(r.durationMs),
        stdoutTail: str(r.stdoutTail),
        stderrTail: str(r.stderrTail),
        snapshotId: str(r.snapshotId) || null,
      };
    });
  // Steps not started yet (and, in a fork, those before its fork point: they are the parent's history).
  const started = new Set(views.map((v) => v.index));
  const forkIndex = num(obj(obj(root?.input).fork).index) ?? 0;
  const firstRead = d.shown?.olderTasks ? Math.min(...views.map((v) => v.index ?? Infinity)) : 0;
  const from = Math.max(forkIndex, Number.isFinite(firstRead) ? firstRead : names.length);
  const pending = names.flatMap((name, index) =>
    started.has(index) || index < from ? [] : [{ taskId: null, index, name, state: 'pending', status: 'pending', startedAt: null, attempts: [], exitCode: null, durationMs: null, stdoutTail: '', stderrTail: '', snapshotId: null }],
  );
  const shownPending = pending.slice(0, PENDING_SHOWN);
  return {
    steps: [...views, ...shownPending].sort((a, b) => (a.index ?? 0) - (b.index ?? 0)),
    notShown: { earlier: Math.max(0, from - forkIndex), later: pending.length - shownPending.length },
  };
}

/** Reads one run's page: the description, approvals, token usage and one page of entries. */
export async function readRunView(deps: ServeDeps, runId: string, before?: number): Promise<RunView> {
  const commitSeq = await deps.store.lastCommitLogSeq();
  const d = await deps.describe(runId);
  const page = await deps.store.listEntriesNewest(d.run.sessionId, { runId, beforeSeq: before, limit: ENTRY_PAGE + 1 });
  const name = nameFromMeta((await deps.store.getSession(d.run.sessionId))?.meta ?? null);
  // Only the tails it shows: a step that printed 64 MB made every render read all of it.
  const output = attemptViews(await deps.store.listOutputTails(runId, ATTEMPT_TAIL), runIsLive(d.run.state));
  const steps = stepsOf(d, output);
  const outputSeq = output.reduce((m, a) => Math.max(m, a.lastSeq), 0);
  const entries = page.slice(0, ENTRY_PAGE);
  const agent = d.run.kind === 'agent';
  const approvals = agent ? await listApprovals(deps.store, runId) : [];
  // Summed by the store: the page read every entry of the run for these three numbers at each render.
  const tokens: RunView['tokens'] = agent ? await deps.store.sumEntryUsage(d.run.sessionId, { runId, kind: ENTRY.model }) : null;
  return {
    ...d,
    owner: await deps.ownerLine(d.run),
    approvals,
    entries,
    olderBefore: page.length > ENTRY_PAGE ? entries[entries.length - 1]!.seq : null,
    name,
    parkReason: parkReasonOf(d),
    tree: d.forkedFrom || d.forks.length ? treeOf((await lineageOf(deps.store, runId)).root) : null,
    steps: steps.steps,
    stepsNotShown: steps.notShown,
    output,
    outputSeq,
    tokens,
    commitSeq,
    artifacts: currentArtifacts(await deps.store.listArtifacts(runId)).map((a) => ({
      id: a.id,
      path: a.path,
      step: a.step,
      sizeBytes: a.sizeBytes,
      sha256: a.sha256,
      href: `/runs/${encodeURIComponent(runId)}/artifacts/${encodeURIComponent(a.id)}`,
    })),
  };
}
