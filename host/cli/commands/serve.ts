/**
 * `berth serve [--port 7777] [--host 127.0.0.1]`: the live web view of the store's runs. The
 * page's actions are the host API's, as the commands' are (approve/deny, cancel, accept/reject,
 * reconcile, fork); a reconcile or fork this host must carry out is driven here, in the
 * background, to the run's end (a stop of the server leaves it for `berth resume`).
 */
import { dirname, join } from 'node:path';
import { BackgroundDrives } from '../../api/background';
import { fork } from '../../api/forks';
import { preparePlan, submitDetached } from '../../api/plans';
import { reconcile } from '../../api/reconcile';
import { cancel, decideCall, judge } from '../../api/decisions';
import { duration } from '../../api/duration';
import { operator } from '../../api/runtime';
import { BerthError } from '../../errors';
import { isLoopback, loadOrCreateToken, startServe, type ServeActions } from '../../serve';
import type { CliContext } from '../context';
import { portFlag } from '../port-flag';
import { readImageFilesByDigest } from '../../sandbox';
import { describeRun } from './runs';
import { driverOf, readHost } from './run-driver';

/** Tasks, effects and snapshots the run page (and `/api/runs/:id`) shows: the newest. */
export const RUN_PAGE_NEWEST = 100;

export interface ServeFlags {
  port?: string;
  host?: string;
  'token-file'?: string;
  'no-token'?: boolean;
}

export async function serveCommand(ctx: CliContext, flags: ServeFlags): Promise<number> {
  const host = flags.host ?? '127.0.0.1';
  const port = portFlag(flags.port, 7777);
  if (flags['no-token'] && !isLoopback(host)) throw new BerthError('serve_needs_token', `refusing to serve ${host} without a token: only loopback addresses may go without one (drop --no-token)`);
  const tokenFile = flags['token-file'] ?? join(dirname(ctx.store.location), 'serve-token');
  const access = flags['no-token'] ? null : loadOrCreateToken(tokenFile);
  const actor = operator();
  const stop = new AbortController();
  const drives = new BackgroundDrives(ctx);
  const server = await startServe(
    {
      store: ctx.store,
      // A page of the newest tasks, effects and snapshots: a run of thousands of steps would be megabytes.
      describe: (runId) => describeRun(ctx.store, runId, { newest: RUN_PAGE_NEWEST }),
      ownerLine: async (run) => driverOf(run, await readHost(ctx.store, ctx.clock.now(), ctx.hostId, run.sessionId), ctx.clock.now()).line,
      actions: webActions(ctx, drives),
      submitPlan: async (plan, o) => {
        const { run, created } = await submitDetached(ctx, await preparePlan(ctx, plan), o);
        return { run, created };
      },
      artifacts: ctx.artifacts,
      // The snapshot diff's text diff reads the snapshot images on this host's engine (no sandbox).
      readImageFiles: (imageId, shas, o) => readImageFilesByDigest(ctx.docker, imageId, shas, o),
      operator: actor,
      token: access?.token ?? null,
      now: () => ctx.clock.now(),
      logError: (err) => ctx.logger.error({ err }, 'berth serve: request failed'),
    },
    { host, port, signal: stop.signal },
  );
  // The token is printed once, when it is made; afterwards the token file holds it. Never as a link
  // holding it: the browser keeps every URL it visits in its history (host/serve/sign-in.ts).
  if (access?.created) process.stdout.write(`sign in at ${server.url}/login with this token (printed once; kept in ${tokenFile}, mode 0600):\n  ${access.token}\n`);
  process.stdout.write(`berth serve: ${server.url} (store ${ctx.store.location}; actions recorded as ${actor}${access ? `; token in ${tokenFile}` : '; no token'})\n`);
  await new Promise<void>((resolve) => {
    const done = () => resolve();
    process.once('SIGINT', done);
    process.once('SIGTERM', done);
  });
  stop.abort();
  await server.close();
  await drives.close();
  return 0;
}

function webActions(ctx: CliContext, drives: BackgroundDrives): ServeActions {
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
      const { owner: host, claim, already } = await cancel(ctx, runId, actor);
      if (already === 'cancelled') return `run ${runId} is already cancelled`;
      const committed = already ? `cancel of run ${runId} was committed before` : `cancel of run ${runId} committed`;
      // A live owner that stopped renewing (frozen, overloaded) stops nothing now: said as it is.
      if (host?.live && claim?.state === 'overdue') return `${committed}; host ${host.hostId} has not renewed its claim for ${duration(claim.heartbeatAgeMs)} (frozen or overloaded): it stops the run when it runs again; after its claim expires at ${new Date(claim.leaseUntil).toISOString()}, berth cancel ${runId} carries it out`;
      return host?.live ? `${committed}; host ${host.hostId} stops it now` : `${committed}; no live host drives it: berth resume ${runId} finishes it`;
    },
    async reconcile(runId, choice, actor) {
      const r = await reconcile(ctx, runId, choice, actor);
      // This host took the run: it carries the decision on to the run's end after answering.
      if (r.kind === 'drive') drives.start(r.rt, runId);
      const now = (await ctx.store.getRun(runId))?.state;
      const how = choice.verify ? 'asked the service again' : choice.restore ? `from snapshot ${choice.restore}` : choice.fail ? 'fail' : 'current sandbox';
      const verified = r.kind === 'verified' || (r.kind === 'drive' && r.verified) ? r.verified : undefined;
      if (verified) {
        const open = verified.open.map((o) => `${o.effectId} still uncertain (${o.reason})`);
        return `reconciling run ${runId} as ${actor} (${how}): ${[...verified.settled.map((x) => `${x.effectId} ${x.status}`), ...open].join('; ') || 'nothing settled'}; now ${now}`;
      }
      return r.kind === 'delivered' ? `reconciling run ${runId} as ${actor} (${how}): ${r.reason}; host ${r.owner.hostId} carries it out` : `reconciling run ${runId} as ${actor} (${how}): now ${now}`;
    },
    judge: async (runId, decision, reason, actor) => (await judge(ctx.store, runId, decision, actor, { reason, once: true })).line,
    async fork(runId, snapshotId, actor) {
      if (!/^[A-Za-z0-9_:.-]+$/.test(snapshotId)) throw new BerthError('usage', `fork from here needs a snapshot id, found "${snapshotId}"`);
      const f = await fork(ctx, runId, { at: snapshotId, actor });
      if (f.rt) drives.start(f.rt, f.run.id);
      return { said: `${f.created ? 'forked' : 'already forked as'} run ${f.run.id} from ${runId} at ${f.point.snapshot.checkpoint} (snapshot ${f.point.snapshot.id}) as ${actor}`, forkRunId: f.run.id };
    },
  };
}

