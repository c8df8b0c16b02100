import { BerthError } from '../errors';
import { submit, type HandlerRegistry, type Kernel, type Submitted } from '../kernel';
import { plainJson, type Json, type Run } from '../model';
import { PLAN_KIND, PlanRunInputSchema, stepEffectId, type LoadedPlan, type PlanRunInput } from '../plan';
import type { EffectWrite, Store } from '../store';
import { newId } from '../support';
import { KERNEL } from '../version';
import { resolvePlanForkPoint, type ForkPoint } from './fork-point';
import { planInputOf } from './lineage';

export interface ForkDeps {
  store: Store;
  /** A started kernel, or (to submit without driving) anything that commits, such as the store. */
  kernel: Pick<Kernel, 'commit'>;
  registry: HandlerRegistry;
  imageExists(imageId: string): Promise<boolean>;
}

export interface ForkOptions {
  /** `--at`: a snapshot id, a step name or number, or `upload`. */
  at: string;
  /** `--plan`: the steps after the fork point come from this plan. */
  plan?: LoadedPlan;
  requestId?: string;
  /** Recorded as the actor of the fork's first transition. */
  actor: string;
}

const STEP_EFFECT = /:step:(\d+):g\d+(?::after-restore:.*)?$/;

/**
 * The steps before the fork point are history: a new plan must have them unchanged (name and
 * command), or the fork would claim a past it does not have. Its environment must be the one the
 * snapshot was taken in.
 */
export function checkForkPlan(parent: PlanRunInput, next: LoadedPlan, index: number, runId: string): void {
  if (next.envFingerprint !== parent.envFingerprint) {
    throw new BerthError('fork_plan_mismatch', `${next.file}: its environment ${next.environmentFile} (fingerprint ${next.envFingerprint.slice(0, 19)}) is not the one run ${runId} ran in (${parent.envFingerprint.slice(0, 19)}): the snapshot belongs to that environment`, { ids: { runId } });
  }
  if (next.plan.steps.length < index) {
    throw new BerthError('fork_plan_mismatch', `${next.file}: has ${next.plan.steps.length} steps, but the fork point comes after step ${index} of run ${runId}`, { ids: { runId } });
  }
  for (let i = 0; i < index; i++) {
    const a = parent.plan.steps[i]!;
    const b = next.plan.steps[i]!;
    const diff = a.name !== b.name ? `name "${b.name}", run ${runId} has "${a.name}"` : a.run !== b.run ? `command ${JSON.stringify(b.run)}, run ${runId} ran ${JSON.stringify(a.run)}` : null;
    if (diff) throw new BerthError('fork_plan_mismatch', `${next.file}: steps[${i}] is before the fork point and must match the run it forks: ${diff}`, { ids: { runId }, details: { file: next.file, path: `steps.${i}` } });
  }
}

/**
 * A `never` step of the parent that may or may not have happened is carried into the fork as
 * uncertain, so the fork parks before running it again and must be reconciled there too. One
 * before the fork point cannot be carried (the fork never reaches it): the fork is refused.
 */
async function carriedEffects(store: Store, run: Run, point: ForkPoint, steps: PlanRunInput['plan']['steps']) {
  const carried: Array<{ index: number; from: string; intent: Json }> = [];
  for (const e of await store.listEffects({ runId: run.id })) {
    if ((e.status !== 'executing' && e.status !== 'unknown') || e.replay !== 'never') continue;
    const m = STEP_EFFECT.exec(e.id);
    const index = m ? Number(m[1]) : -1;
    if (index < point.index) {
      throw new BerthError('fork_uncertain_history', `effect ${e.id} (${e.kind}) of run ${run.id} is uncertain (${e.status}) before the fork point: reconcile it there first (berth reconcile ${run.id}) or fork at an earlier checkpoint`, { ids: { runId: run.id, effectId: e.id } });
    }
    if (index < steps.length) carried.push({ index, from: e.id, intent: e.intent });
  }
  return carried;
}

/** A fork checked and ready to submit: everything a refusal can come from is decided before any host starts. */
export interface PlannedFork {
  run: Run;
  point: ForkPoint;
  input: PlanRunInput;
  carried: Array<{ index: number; from: string; intent: Json }>;
}

/**
 * Checks a fork of a plan run without writing anything: the fork point, a new plan against the
 * history it keeps, and the parent's uncertain effects.
 */
export async function planFork(d: Pick<ForkDeps, 'store' | 'imageExists'>, run: Run, o: Pick<ForkOptions, 'at' | 'plan'>): Promise<PlannedFork> {
  const parent = await planInputOf(d.store, run);
  if (!parent) throw new BerthError('fork_invalid', `run ${run.id} is not a plan run (kind ${run.kind})`, { ids: { runId: run.id } });
  const point = await resolvePlanForkPoint(d.store, d.imageExists, run, o.at);
  if (o.plan) checkForkPlan(parent, o.plan, point.index, run.id);
  const plan = o.plan?.plan ?? parent.plan;
  const carried = await carriedEffects(d.store, run, point, plan.steps);
  const fork = { runId: run.id, snapshotId: point.snapshot.id, checkpoint: point.snapshot.checkpoint, index: point.index };
  return { run, point, carried, input: { ...parent, planFile: o.plan?.file ?? parent.planFile, plan, fork } };
}

/**
 * Submits a planned fork: a new run that continues from a committed checkpoint with its sandbox
 * leased from that checkpoint's snapshot. Nothing before the fork point runs again.
 */
export async function submitFork(d: Pick<ForkDeps, 'store' | 'kernel' | 'registry'>, f: PlannedFork, o: Pick<ForkOptions, 'requestId' | 'actor'>): Promise<Submitted & { point: ForkPoint }> {
  const { run, point, input, carried } = f;
  const where = `${point.snapshot.checkpoint}${point.runId === run.id ? '' : ` of ${point.runId}`}`;
  const submitted = await submit(d, {
    requestId: o.requestId ?? newId('req'),
    runKind: 'plan',
    root: { kind: PLAN_KIND, input: plainJson(PlanRunInputSchema.parse(input)) },
    versions: { kernel: `${KERNEL.name}@${KERNEL.version}`, envFingerprint: input.envFingerprint, imageDigest: input.environment.image.digest },
    sessionMeta: { plan: input.planFile, name: input.plan.name ?? null, forkedFrom: input.fork! },
    reason: `forked from run ${run.id} at ${where} (snapshot ${point.snapshot.id})`,
    forkedFromRunId: run.id,
    actor: o.actor,
    effects: ({ runId, taskId }): EffectWrite[] =>
      carried.map((c) => ({
        id: stepEffectId(runId, c.index, 0),
        create: { runId, taskId, kind: 'plan.step', intent: { ...(c.intent as object), carriedFrom: c.from } as Json, replay: 'never' },
        set: { status: 'unknown', error: { code: 'carried_uncertain', message: `carried from run ${run.id}: effect ${c.from} may or may not have happened` } },
      })),
  });
  return { ...submitted, point };
}

/** {@link planFork} then {@link submitFork}. */
export async function forkPlanRun(d: ForkDeps, run: Run, o: ForkOptions): Promise<Submitted & { point: ForkPoint }> {
  return submitFork(d, await planFork(d, run, o), o);
}
