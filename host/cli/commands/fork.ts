import { BerthError } from '../../errors';
import { forkSession, lineageOf, planFork, submitFork, type LineageNode } from '../../fork';
import { loadPlan } from '../../plan';
import { snapshotEngine } from '../../sandbox';
import { DeltaImages } from '../../snapshot';
import type { CliContext } from '../context';
import { duration, emit } from '../output';
import { drive, operator, startHost } from './plan-run';
import { checkPlanSecrets } from './preflight';
import { getRunOrThrow } from './runs';
import { cliRuntime } from '../cli-runtime';

export interface ForkFlags {
  at?: string;
  plan?: string;
  detach?: boolean;
  'request-id'?: string;
}

/**
 * `berth fork RUN --at STEP|SNAPSHOT [--plan FILE] [--detach]`: a new run continuing from a
 * committed checkpoint of RUN, with its sandbox leased from that checkpoint's snapshot. Driven at
 * once unless `--detach` (then `berth resume FORK` drives it).
 */
export async function forkRun(ctx: CliContext, runId: string, flags: ForkFlags): Promise<number> {
  if (!flags.at) throw new BerthError('usage', 'berth fork RUN needs --at STEP|SNAPSHOT (a step name or number to fork after, `upload` for before the first step, or a snapshot id from berth show RUN)');
  if (runId.startsWith('ses_')) return forkAgentSession(ctx, runId, flags.at);
  const run = await getRunOrThrow(ctx.store, runId);
  if (run.kind !== 'plan') throw new BerthError('fork_invalid', `run ${runId} is an ${run.kind} run: fork its session with berth fork ${run.sessionId} --at TURN`, { ids: { runId } });
  const plan = flags.plan ? await loadPlan(flags.plan) : undefined;
  if (plan) await checkPlanSecrets(plan);
  const images = new DeltaImages({ engine: snapshotEngine(ctx.docker), store: ctx.store, logger: ctx.logger });
  // Every refusal (fork point, plan, uncertain history) before a host starts or anything is written.
  const planned = await planFork({ store: ctx.store, imageExists: images.exists }, run, { at: flags.at, plan });
  const by = { requestId: flags['request-id'], actor: operator() };
  if (flags.detach) {
    const { run: fork, point, created } = await submitFork(submitOnly(ctx), planned, by);
    emit(ctx.json, { runId: fork.id, forkedFrom: planned.input.fork, created }, () => `${created ? 'forked' : 'already forked as'} run ${fork.id} from ${runId} at ${point.snapshot.checkpoint} (snapshot ${point.snapshot.id}); drive it with: berth resume ${fork.id}`);
    return 0;
  }
  const total = planned.input.plan.steps.length;
  const rt = await startHost(ctx, () => total);
  const { run: fork, point, created } = await submitFork(rt, planned, by);
  if (!ctx.json) process.stderr.write(`${created ? 'forked' : 'already forked as'} run ${fork.id} from ${runId} at ${point.snapshot.checkpoint} (snapshot ${point.snapshot.id}); steps ${point.index + 1}-${total} run here\n`);
  return drive(ctx, rt, fork.id);
}

/** `berth fork SESSION --at TURN`: a new agent session as the original was after that turn; `berth chat NEW` continues it. */
async function forkAgentSession(ctx: CliContext, sessionId: string, at: string): Promise<number> {
  // A snapshot image still kept in the store as a delta layer counts, and is loaded to be tagged.
  const images = new DeltaImages({ engine: snapshotEngine(ctx.docker), store: ctx.store, logger: ctx.logger });
  const f = await forkSession({ store: ctx.store, kernel: { commit: ctx.store.commit.bind(ctx.store) }, imageExists: images.exists, tag: images.tag }, sessionId, at, operator());
  emit(ctx.json, f, () => `forked session ${f.sessionId} from ${sessionId} at turn ${f.forkedFrom.index} (run ${f.forkedFrom.runId}, ${f.entries} entries, workspace of snapshot ${f.forkedFrom.snapshotId}); continue it with: berth chat ${f.sessionId} "MESSAGE"`);
  return 0;
}

/**
 * What a detached submit needs: the handlers (to name the root kind's version) and a commit that
 * claims nothing: the fork is left for a worker or a later `berth resume`.
 */
function submitOnly(ctx: CliContext) {
  const rt = cliRuntime(ctx, { claim: 'none' });
  return { store: ctx.store, registry: rt.registry, kernel: rt.kernel };
}

/** `berth tree RUN`: the lineage RUN belongs to, from its oldest ancestor, with each run's state. */
export async function tree(ctx: CliContext, runId: string): Promise<number> {
  await getRunOrThrow(ctx.store, runId);
  const { root } = await lineageOf(ctx.store, runId);
  const now = ctx.clock.now();
  const plain = (n: LineageNode): object => ({ runId: n.run.id, kind: n.run.kind, state: n.run.state, forkedFrom: n.forkedFrom, children: n.children.map(plain) });
  const lines: string[] = [];
  const walk = (n: LineageNode, prefix: string, last: boolean, top: boolean) => {
    const at = n.forkedFrom ? ` forked at ${n.forkedFrom.checkpoint}` : '';
    const mark = n.run.id === runId ? '  <' : '';
    lines.push(`${top ? '' : `${prefix}${last ? '└─ ' : '├─ '}`}${n.run.id} ${n.run.state}${at} (${duration(now - n.run.createdAt)} ago)${mark}`);
    n.children.forEach((c, i) => walk(c, top ? '' : `${prefix}${last ? '   ' : '│  '}`, i === n.children.length - 1, false));
  };
  walk(root, '', true, true);
  emit(ctx.json, plain(root), () => lines.join('\n'));
  return 0;
}
