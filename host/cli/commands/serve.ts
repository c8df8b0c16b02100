/**
 * `berth serve [--port 7777] [--host 127.0.0.1]`: the live web view of the store's runs. The
 * page's actions are the host API's (host/api: approve/deny, cancel, accept/reject); reconcile and
 * fork run the `berth reconcile` / `berth fork` command (the same API) as a child process, because
 * they drive the run on to its end as its owner, which outlives a request.
 */
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { cancel, decideCall, judge } from '../../api/decisions';
import { operator } from '../../api/runtime';
import { BerthError } from '../../errors';
import { isLoopback, loadOrCreateToken, startServe, type ReconcileRequest, type ServeActions } from '../../serve';
import type { CliContext } from '../context';
import { describeRun, getRunOrThrow } from './runs';
import { driverOf, readHost } from './run-driver';

export interface ServeFlags {
  port?: string;
  host?: string;
  'token-file'?: string;
  'no-token'?: boolean;
}

/** How long a reconcile click waits for the run to leave needs_reconciliation before answering. */
const RECONCILE_ANSWER_MS = 15_000;

export async function serveCommand(ctx: CliContext, flags: ServeFlags): Promise<number> {
  const host = flags.host ?? '127.0.0.1';
  if (flags.port !== undefined && !/^\d+$/.test(flags.port)) throw new BerthError('usage', `--port expects a port number, found "${flags.port}"`);
  const port = flags.port === undefined ? 7777 : Number(flags.port);
  if (flags['no-token'] && !isLoopback(host)) throw new BerthError('serve_needs_token', `refusing to serve ${host} without a token: only loopback addresses may go without one (drop --no-token)`);
  const tokenFile = flags['token-file'] ?? join(dirname(ctx.store.location), 'serve-token');
  const access = flags['no-token'] ? null : loadOrCreateToken(tokenFile);
  const actor = operator();
  const stop = new AbortController();
  const server = await startServe(
    {
      store: ctx.store,
      describe: (runId) => describeRun(ctx.store, runId),
      ownerLine: async (run) => driverOf(run, await readHost(ctx.store, ctx.clock.now(), ctx.hostId, run.sessionId), ctx.clock.now()).line,
      actions: webActions(ctx),
      artifacts: ctx.artifacts,
      operator: actor,
      token: access?.token ?? null,
      now: () => ctx.clock.now(),
      logError: (err) => ctx.logger.error({ err }, 'berth serve: request failed'),
    },
    { host, port, signal: stop.signal },
  );
  // The login link is printed once, when the token is made; afterwards the token file holds it.
  if (access?.created) process.stdout.write(`login (once; the token is kept in ${tokenFile}, mode 0600):\n  ${server.url}/login?token=${access.token}\n`);
  process.stdout.write(`berth serve: ${server.url} (store ${ctx.store.location}; actions recorded as ${actor}${access ? `; token in ${tokenFile}` : '; no token'})\n`);
  await new Promise<void>((resolve) => {
    const done = () => resolve();
    process.once('SIGINT', done);
    process.once('SIGTERM', done);
  });
  stop.abort();
  await server.close();
  return 0;
}

function webActions(ctx: CliContext): ServeActions {
  return {
    async approve(runId, id, digest, actor) {
      const { approval: v } = await decideCall(ctx, runId, id, 'approve', actor, digest);
      return `${v.state} ${v.tool} call ${v.toolCallId} (digest ${v.digest}) as ${v.by}`;
    },
    async deny(runId, id, actor) {
      const { approval: v } = await decideCall(ctx, runId, id, 'deny', actor);
      return `${v.state} ${v.tool} call ${v.toolCallId} as ${v.by}`;
    },
    async cancel(runId, actor) {
      const { owner: host } = await cancel(ctx, runId, actor);
      return host?.live ? `cancel of run ${runId} committed; host ${host.hostId} stops it now` : `cancel of run ${runId} committed; no live host drives it: berth resume ${runId} finishes it`;
    },
    reconcile: (runId, choice, actor) => reconcileChild(ctx, runId, choice, actor),
    judge: async (runId, decision, reason, actor) => (await judge(ctx.store, runId, decision, actor, { reason })).line,
    fork: (runId, snapshotId, actor) => forkChild(ctx, runId, snapshotId, actor),
  };
}

/**
 * Runs `berth reconcile RUN …` (the CLI's own command, same checks and same code path) as a child
 * of this server with the operator as its actor, and answers once the run has left
 * needs_reconciliation or the command has ended, saying which.
 */
async function reconcileChild(ctx: CliContext, runId: string, choice: ReconcileRequest, actor: string): Promise<string> {
  const run = await getRunOrThrow(ctx.store, runId);
  if (run.state !== 'needs_reconciliation') throw new BerthError('run_not_reconcilable', `run ${runId} is ${run.state}, not needs_reconciliation`, { ids: { runId } });
  const args = ['reconcile', runId, '--store', ctx.store.location];
  if (choice.accept) args.push('--accept');
  if (choice.rejectEffect) args.push('--reject-effect');
  if (choice.restore) args.push('--restore', choice.restore);
  if (choice.fail) args.push('--fail');
  const env = { ...process.env, BERTH_OPERATOR: actor.replace(/^user:/, ''), BERTH_HOST_ID: ctx.hostId };
  const child = spawn(process.execPath, [...process.execArgv, process.argv[1]!, ...args], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  let exit: number | null | undefined;
  child.on('exit', (code) => (exit = code));
  const started = Date.now();
  while (Date.now() - started < RECONCILE_ANSWER_MS) {
    await new Promise((r) => setTimeout(r, 100));
    const now = await ctx.store.getRun(runId);
    if (exit !== undefined) {
      const last = stderr.trim().split('\n').filter(Boolean).pop() ?? '';
      if (exit === 0) return `berth reconcile ${args.slice(1).filter((a) => a !== ctx.store.location && a !== '--store').join(' ')}: run ${runId} is ${now?.state}`;
      throw new BerthError('reconcile_refused', `berth reconcile exited ${exit}: ${last.replace(/^berth: /, '')}; run ${runId} is ${now?.state}`, { ids: { runId } });
    }
    if (now && now.state !== 'needs_reconciliation') return `reconciling run ${runId} as ${actor} (${choice.restore ? `from snapshot ${choice.restore}` : choice.fail ? 'fail' : 'current sandbox'}): now ${now.state}`;
  }
  return `berth reconcile is still deciding run ${runId}; this page updates as it moves`;
}

/** How long a fork click waits for `berth fork` to say which run it made. */
const FORK_ANSWER_MS = 60_000;

/**
 * Runs `berth fork RUN --at SNAPSHOT` (the CLI's own command: its checks, its submit, and it drives
 * the fork to its end) as a child of this server with the operator as actor. Answers with the new
 * run's id as soon as the command has said it forked, or with the command's refusal.
 */
async function forkChild(ctx: CliContext, runId: string, snapshotId: string, actor: string): Promise<{ said: string; forkRunId: string | null }> {
  await getRunOrThrow(ctx.store, runId);
  if (!/^[A-Za-z0-9_:.-]+$/.test(snapshotId)) throw new BerthError('usage', `fork from here needs a snapshot id, found "${snapshotId}"`);
  const args = ['fork', runId, '--at', snapshotId, '--store', ctx.store.location];
  const env = { ...process.env, BERTH_OPERATOR: actor.replace(/^user:/, ''), BERTH_HOST_ID: ctx.hostId };
  const child = spawn(process.execPath, [...process.execArgv, process.argv[1]!, ...args], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  let exit: number | null | undefined;
  child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-8000)));
  child.on('exit', (code) => (exit = code));
  const started = Date.now();
  while (Date.now() - started < FORK_ANSWER_MS) {
    await new Promise((r) => setTimeout(r, 100));
    const said = /^(?:forked|already forked as) run (\S+) from .*$/m.exec(stderr);
    if (said) return { said: `${said[0]} (berth fork as ${actor})`, forkRunId: said[1]! };
    if (exit !== undefined) {
      const last = stderr.trim().split('\n').filter(Boolean).pop() ?? '';
      throw new BerthError('fork_refused', `berth fork exited ${exit}: ${last.replace(/^berth: /, '')}`, { ids: { runId } });
    }
  }
  return { said: `berth fork ${runId} --at ${snapshotId} is still starting; its run appears under Lineage`, forkRunId: null };
}
