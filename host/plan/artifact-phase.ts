import { currentArtifacts, describeProblem, verifyArtifacts, type ArtifactProblem, type ArtifactStore } from '../artifacts';
import { plainJson, type Json } from '../model';
import { sandboxDocId, type RunSandbox } from '../run-sandbox';
import { ARTIFACTS_RERUN, ARTIFACTS_WAIVED, nextIndexOf } from './checkpoints';
import type { PlanContext, PlanDecision } from './reconcile-phase';
import { parkRun, sandboxAdvice } from './reconcile-phase';
import type { PlanProgress } from './plan-input';


/**
 * Before the run goes on, once per host process and run (so on every resume, not before every
 * step): every artifact committed so far must be in the store with its digest. A missing or
 * altered one is made again by re-running its producing step from the newest snapshot before it,
 * when that step and every step after it that has run are `safe`; otherwise the run waits for an
 * operator, the reason naming the artifact and the `never` step. Returns undefined to go on.
 */
export async function checkArtifacts(ctx: PlanContext, sb: RunSandbox, store: ArtifactStore | undefined, verified: Set<string>, progress: (p: PlanProgress) => void): Promise<PlanDecision | undefined> {
  const runId = ctx.task.runId!;
  if (!store || verified.has(runId)) return undefined;
  const cp = ctx.state;
  const input = ctx.value;
  const waived = new Set(
    (await ctx.store.listEntries(ctx.task.sessionId, { runId }))
      .filter((e) => e.kind === ARTIFACTS_WAIVED)
      .flatMap((e) => (e.body as { artifacts?: string[] }).artifacts ?? []),
  );
  const records = currentArtifacts(await ctx.store.listArtifacts(runId), cp.index).filter((a) => !waived.has(a.id));
  const problems = await verifyArtifacts(store, records, ctx.signal);
  if (problems.length === 0) {
    verified.add(runId);
    return undefined;
  }
  const first = Math.min(...problems.map((p) => p.artifact.stepIndex));
  const what = `artifact${problems.length === 1 ? '' : 's'} ${problems.map(describeProblem).join(', ')}`;
  const park = async (why: string) =>
    parkRun(cp, { kind: 'reconcile', index: cp.index, reason: `${what}: ${why}; ${await sandboxAdvice(ctx, sb, runId)}`, artifacts: problems.map((p) => p.artifact.id) });

  const producing = input.plan.steps[first]!;
  if (producing.replay === 'never') return park(`its producing step ${producing.name} is replay never, so it is not run again to make it anew`);
  const snap = (await ctx.store.listSnapshots({ runId, pruned: false })).filter((s) => nextIndexOf(s.checkpoint) <= first).at(-1);
  if (!snap) return park(`the run has no snapshot from before step ${producing.name} to run it again from`);
  const from = nextIndexOf(snap.checkpoint);
  const never = input.plan.steps.slice(from, cp.index).filter((s) => s.replay === 'never');
  if (never.length) {
    return park(`re-running ${producing.name} from snapshot ${snap.id} (${snap.checkpoint}) would run ${never.map((s) => s.name).join(', ')} again, and ${never.length === 1 ? 'it is' : 'they are'} replay never`);
  }
  const ensured = await sb.restore(runId, ctx.task.sessionId, input.environment, snap.id, ctx.signal);
  if (ensured.kind !== 'ok') return park(`snapshot ${snap.id} before step ${producing.name} cannot be restored (${ensured.kind === 'reconcile' ? ensured.reason : 'unknown'})`);
  verified.add(runId);
  ctx.log.warn({ runId, problems: problems.map((p) => ({ id: p.artifact.id, state: p.state })), snapshotId: snap.id, from }, 'artifacts missing or altered; re-running the steps that made them');
  progress({ type: 'sandbox', runId, message: `${what}; re-running from step ${input.plan.steps[from]?.name ?? from} (snapshot ${snap.id})` });
  return {
    type: 'next',
    phase: 'step',
    checkpoint: { index: from, generation: cp.generation + 1, ...(cp.usedMs !== undefined ? { usedMs: cp.usedMs } : {}) },
    writes: {
      documents: [{ documentId: sandboxDocId(runId), op: ensured.pointer as Json }],
      entries: [{ kind: ARTIFACTS_RERUN, body: plainJson({ problems: problems.map(problemBody), from, snapshotId: snap.id }) }],
    },
  };
}

const problemBody = (p: ArtifactProblem) => ({ id: p.artifact.id, path: p.artifact.path, step: p.artifact.step, sha256: p.artifact.sha256, state: p.state });
