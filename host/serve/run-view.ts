import { currentArtifacts } from '../artifacts';
import { ENTRY, listApprovals, type ApprovalView, type ModelEntry } from '../agent';
import type { Entry, Json } from '../model';
import { STEP_KIND } from '../plan';
import type { RunDescription, ServeDeps } from './deps';

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
  tokens: { prompt: number; completion: number; total: number } | null;
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

/** A plan step as its task records it: state, and the output tails of its result (done or failed). */
export interface StepView {
  taskId: string;
  name: string;
  status: string;
  exitCode: number | null;
  durationMs: number | null;
  stdoutTail: string;
  stderrTail: string;
  snapshotId: string | null;
}

const obj = (v: Json | undefined): Record<string, Json> => (v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, Json>) : {});
const str = (v: Json | undefined): string => (typeof v === 'string' ? v : '');
const num = (v: Json | undefined): number | null => (typeof v === 'number' ? v : null);

function stepsOf(d: RunDescription): StepView[] {
  const root = d.tasks.find((t) => t.id === d.run.rootTaskId);
  const planSteps = obj(obj(root?.input).plan).steps;
  const names = Array.isArray(planSteps) ? planSteps.map((s) => str(obj(s).name)) : [];
  return d.tasks
    .filter((t) => t.kind === STEP_KIND)
    .map((t) => {
      const r = obj(t.outcome === 'ok' ? t.result : (t.error?.details as Json | undefined));
      const index = num(obj(t.input).index);
      return {
        taskId: t.id,
        name: str(r.step) || (index !== null ? names[index] || `step ${index + 1}` : t.id),
        status: t.status === 'terminal' ? String(t.outcome) : `${t.status}${t.phase ? ` (${t.phase})` : ''}`,
        exitCode: num(r.exitCode),
        durationMs: num(r.durationMs),
        stdoutTail: str(r.stdoutTail),
        stderrTail: str(r.stderrTail),
        snapshotId: str(r.snapshotId) || null,
      };
    });
}

/** Reads one run's page: the description, approvals, token usage and one page of entries. */
export async function readRunView(deps: ServeDeps, runId: string, before?: number): Promise<RunView> {
  const commitSeq = await deps.store.lastCommitLogSeq();
  const d = await deps.describe(runId);
  const page = await deps.store.listEntriesNewest(d.run.sessionId, { runId, beforeSeq: before, limit: ENTRY_PAGE + 1 });
  const entries = page.slice(0, ENTRY_PAGE);
  const agent = d.run.kind === 'agent';
  const approvals = agent ? await listApprovals(deps.store, runId) : [];
  let tokens: RunView['tokens'] = null;
  if (agent) {
    tokens = { prompt: 0, completion: 0, total: 0 };
    for (const e of await deps.store.listEntries(d.run.sessionId, { runId })) {
      if (e.kind !== ENTRY.model) continue;
      const u = (e.body as unknown as ModelEntry).usage;
      if (!u) continue;
      tokens.prompt += u.promptTokens ?? 0;
      tokens.completion += u.completionTokens ?? 0;
      tokens.total += u.totalTokens ?? 0;
    }
  }
  return {
    ...d,
    owner: await deps.ownerLine(d.run),
    approvals,
    entries,
    olderBefore: page.length > ENTRY_PAGE ? entries[entries.length - 1]!.seq : null,
    steps: stepsOf(d),
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
