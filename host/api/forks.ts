import { BerthError } from '../errors';
import { forkSession, planFork, submitFork } from '../fork';
import { loadPlan, type LoadedPlan } from '../plan';
import { snapshotEngine } from '../sandbox';
import { DeltaImages } from '../snapshot';
import type { HostParts } from './assemble';
import { getRunOrThrow } from './decisions';
import { startHost } from './drive';
import { checkPlanSecrets } from './preflight';
import { hostRuntime, type RuntimeOptions, type RuntimeParts } from './runtime';

export interface ForkOptions {
  /** A step name or number to fork after, `upload`, or a snapshot id. */
  at: string;
  /** Later steps from this plan file or loaded plan (earlier ones must match). */
  plan?: string | LoadedPlan;
  requestId?: string;
  actor: string;
  /** Submit only: a worker or a resume drives the fork. */
  detach?: boolean;
}

const images = (p: HostParts) => new DeltaImages({ engine: snapshotEngine(p.docker), store: p.store, logger: p.logger });

/**
 * A new plan run continuing from a committed checkpoint of `runId`, its sandbox leased from that
 * checkpoint's snapshot. Every refusal (fork point, plan, uncertain history) comes before a host
 * starts or anything is written. Detached: the fork is only submitted; otherwise `rt` owns it and
 * the caller drives it on.
 */
export async function fork(p: RuntimeParts, runId: string, o: ForkOptions, host: Omit<RuntimeOptions, 'claim'> = {}) {
  const run = await getRunOrThrow(p.store, runId);
  if (run.kind !== 'plan') throw new BerthError('fork_invalid', `run ${runId} is an ${run.kind} run: fork its session with berth fork ${run.sessionId} --at TURN`, { ids: { runId } });
  const plan = typeof o.plan === 'string' ? await loadPlan(o.plan) : o.plan;
  if (plan) await checkPlanSecrets(plan);
  const planned = await planFork({ store: p.store, imageExists: images(p).exists }, run, { at: o.at, plan });
  const by = { requestId: o.requestId, actor: o.actor };
  if (o.detach) {
    // A commit that claims nothing: the fork is left for a worker or a later resume.
    const rt = hostRuntime(p, { claim: 'none' });
    return { ...(await submitFork({ store: p.store, registry: rt.registry, kernel: rt.kernel }, planned, by)), planned, rt: null };
  }
  const { rt } = await startHost(p, host);
  return { ...(await submitFork(rt, planned, by)), planned, rt };
}

/** A new agent session as `sessionId` was after its `at`-th turn (conversation and workspace). */
export function forkAgentSession(p: HostParts, sessionId: string, at: string, actor: string) {
  // A snapshot image still kept in the store as a delta layer counts, and is loaded to be tagged.
  const im = images(p);
  return forkSession({ store: p.store, kernel: { commit: p.store.commit.bind(p.store) }, imageExists: im.exists, tag: im.tag }, sessionId, at, actor);
}
