import type { StepResult } from '../../plan';
import { EGRESS_ENTRY, isNetworkAttempt, type EgressAttempt } from '../../egress';
import type { CliContext } from '../context';
import { duration, emit, escapeControl, LOG_COLUMN, outputLines } from '../output';
import { getRunOrThrow } from './runs';

type ArtifactEntry = { kind: string; problems?: Array<{ path: string; step: string; state: string }>; from?: number; snapshotId?: string; artifacts?: string[]; step?: string; skipped?: Array<{ path: string; why: string }> };

/** One `berth │` line for an artifact entry (re-run, waived, skipped). */
function artifactLine(a: ArtifactEntry): string {
  if (a.kind === 'plan.artifacts.rerun') return `artifacts ${(a.problems ?? []).map((p) => `${p.path} of step ${p.step} (${p.state})`).join(', ')}: re-ran from step ${(a.from ?? 0) + 1} (snapshot ${a.snapshotId})`;
  if (a.kind === 'plan.artifacts.waived') return `artifacts continued without by the operator: ${(a.artifacts ?? []).join(', ')}`;
  return `step ${a.step}: artifacts skipped: ${(a.skipped ?? []).map((x) => `${x.path} (${x.why})`).join(', ')}`;
}

/** `berth logs RUN`: what each step printed (tails kept with the step's result), and every egress attempt of the run. */
export async function logs(ctx: CliContext, runId: string): Promise<number> {
  const run = await getRunOrThrow(ctx.store, runId);
  const entries = await ctx.store.listEntries(run.sessionId, { runId });
  const steps = entries.filter((e) => e.kind === 'plan.step.output').map((e) => e.body as unknown as StepResult);
  const egress = entries.filter((e) => e.kind === EGRESS_ENTRY).map((e) => e.body as unknown as Omit<EgressAttempt, 'runId'>);
  const network = entries.filter((e) => e.kind === 'egress.open' || e.kind === 'egress.override').map((e) => ({ kind: e.kind, ...(e.body as object) }));
  // Artifacts found missing or altered on a resume, and what was done about them.
  const artifacts = entries.filter((e) => e.kind.startsWith('plan.artifacts.')).map((e) => ({ kind: e.kind, ...(e.body as object) }));
  // Berth's own lines start with `berth │`, command output with `  out │`/`  err │` (escaped): a step
  // that prints a line looking like an audit line still shows as output. --json keeps them apart by field.
  const own = (text: string) => LOG_COLUMN.berth + escapeControl(text);
  emit(ctx.json, { runId, steps, egress, network, artifacts }, () =>
    [
      ...network.map((n) => own(n.kind === 'egress.open' ? 'network open: outside hosts reachable, not audited' : 'network: allow list accepted with allowOverride')),
      ...(steps.length === 0
        ? [own(`run ${runId} has no finished steps yet`)]
        : steps.flatMap((s) => [own(`step ${s.step}: exit ${s.exitCode}, ${duration(s.durationMs)}${s.diskExceeded ? ', disk_exceeded' : ''}${s.pidsLimited ? ', pids_exceeded' : ''}${s.artifacts ? `, ${s.artifacts} artifact(s) kept` : ''}`), ...outputLines('stdout', s.stdoutTail), ...outputLines('stderr', s.stderrTail)])),
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
