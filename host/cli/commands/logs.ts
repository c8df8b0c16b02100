import { EGRESS_ENTRY, isNetworkAttempt, type EgressAttempt } from '../../egress';
import type { StepResult } from '../../plan';
import type { CliContext } from '../context';
import { emit } from '../output';
import { getRunOrThrow } from './runs';
import { agentHistory, attemptViews, decisionsOf, own, planHistory } from './logs-history';
import { followLogs } from './logs-follow';

type ArtifactEntry = { kind: string; problems?: Array<{ path: string; step: string; state: string }>; from?: number; snapshotId?: string; artifacts?: string[]; step?: string; skipped?: Array<{ path: string; why: string }> };

/** One `berth │` line for an artifact entry (re-run, waived, skipped). */
function artifactLine(a: ArtifactEntry): string {
  if (a.kind === 'plan.artifacts.rerun') return `artifacts ${(a.problems ?? []).map((p) => `${p.path} of step ${p.step} (${p.state})`).join(', ')}: re-ran from step ${(a.from ?? 0) + 1} (snapshot ${a.snapshotId})`;
  if (a.kind === 'plan.artifacts.waived') return `artifacts continued without by the operator: ${(a.artifacts ?? []).join(', ')}`;
  return `step ${a.step}: artifacts skipped: ${(a.skipped ?? []).map((x) => `${x.path} (${x.why})`).join(', ')}`;
}

/**
 * `berth logs RUN [-f]`: what each step or tool call printed (tails kept with a finished step's
 * result; the live output of an attempt that is running or was cut off by a crash), the operator's
 * decisions and parks, and every egress attempt of the run. `-f` follows the run's output live.
 */
export async function logs(ctx: CliContext, runId: string, o: { follow?: boolean } = {}): Promise<number> {
  if (o.follow) return followLogs(ctx, runId);
  const run = await getRunOrThrow(ctx.store, runId);
  const [entries, transitions, chunks] = await Promise.all([ctx.store.listEntries(run.sessionId, { runId }), ctx.store.listRunTransitions(runId), ctx.store.listOutput({ runId })]);
  const attempts = attemptViews(chunks, run);
  const steps = entries.filter((e) => e.kind === 'plan.step.output').map((e) => e.body as unknown as StepResult);
  const egress = entries.filter((e) => e.kind === EGRESS_ENTRY).map((e) => e.body as unknown as Omit<EgressAttempt, 'runId'>);
  const network = entries.filter((e) => e.kind === 'egress.open' || e.kind === 'egress.override').map((e) => ({ kind: e.kind, ...(e.body as object) }));
  // Artifacts found missing or altered on a resume, and what was done about them.
  const artifacts = entries.filter((e) => e.kind.startsWith('plan.artifacts.')).map((e) => ({ kind: e.kind, ...(e.body as object) }));
  const decisions = decisionsOf(transitions);
  // Berth's own lines start with `berth │`, command output with `  out │`/`  err │` (escaped): a step
  // that prints a line looking like an audit line still shows as output. --json keeps them apart by field.
  const history = run.kind === 'agent' ? agentHistory(entries, attempts, transitions) : planHistory(entries, attempts, transitions);
  emit(ctx.json, { runId, steps, attempts, decisions, egress, network, artifacts }, () =>
    [
      ...network.map((n) => own(n.kind === 'egress.open' ? 'network open: outside hosts reachable, not audited' : 'network: allow list accepted with allowOverride')),
      ...(history.length === 0 ? [own(`run ${runId} has no ${run.kind === 'agent' ? 'entries' : 'finished steps'} yet`)] : history),
      ...artifacts.map((a) => own(artifactLine(a as ArtifactEntry))),
      ...egress.map((a) =>
        own(
          isNetworkAttempt(a)
            ? `egress ${new Date(a.at).toISOString()} ${a.decision} ${a.method} ${a.target} x${a.count ?? 1} (${a.reason})`
            : `egress ${new Date(a.at).toISOString()} ${a.decision} ${a.method} ${a.target} (${a.reason}; ${a.bytesOut} B out, ${a.bytesIn} B in)`,
        ),
      ),
    ].join('\n'),
  );
  return 0;
}
