import { BerthError } from '../../errors';
import { fork, forkAgentSession } from '../../api/forks';
import { operator } from '../../api/runtime';
import { lineageOf, type LineageNode } from '../../fork';
import type { CliContext } from '../context';
import { duration, emit } from '../output';
import { detachedAnswer } from './detached';
import { progressPrinter } from './progress';
import { finishDriven } from './run-summary';
import { getRunOrThrow } from './runs';

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
  if (runId.startsWith('ses_')) {
    const f = await forkAgentSession(ctx, runId, flags.at, operator());
    emit(ctx.json, f, () => `forked session ${f.sessionId} from ${runId} at turn ${f.forkedFrom.index} (run ${f.forkedFrom.runId}, ${f.entries} entries, workspace of snapshot ${f.forkedFrom.snapshotId}); continue it with: berth chat ${f.sessionId} "MESSAGE"`);
    return 0;
  }
  let total = 0;
  const f = await fork(ctx, runId, { at: flags.at, plan: flags.plan, requestId: flags['request-id'], actor: operator(), detach: flags.detach }, { onProgress: progressPrinter(ctx.json, () => total) });
  total = f.planned.input.plan.steps.length;
  const { run: forked, point, created } = f;
  if (!f.rt) {
    emit(ctx.json, detachedAnswer(forked, created, f.planned.input.fork ?? null), () => `${created ? 'forked' : 'already forked as'} run ${forked.id} from ${runId} at ${point.snapshot.checkpoint} (snapshot ${point.snapshot.id}); drive it with: berth resume ${forked.id}`);
    return 0;
  }
  if (!ctx.json) process.stderr.write(`${created ? 'forked' : 'already forked as'} run ${forked.id} from ${runId} at ${point.snapshot.checkpoint} (snapshot ${point.snapshot.id}); ${stepsHere(point.index, total)}\n`);
  return finishDriven(ctx, f.rt, forked.id);
}

/** Which steps a fork after `done` of `total` steps runs here (1-based, as `berth show` numbers them). */
export function stepsHere(done: number, total: number): string {
  if (done >= total) return 'no step is left to run: it forks at the end of the plan, so it completes at once';
  return done + 1 === total ? `step ${total} runs here` : `steps ${done + 1}-${total} run here`;
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
