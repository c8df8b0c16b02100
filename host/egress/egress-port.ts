import type { Logger } from 'pino';
import { ModelGateway, storeLedger } from '../gateway';
import { OPEN_RUN_STATES, plainJson } from '../model';
import type { EgressPort } from '../sandbox/sandbox-egress';
import type { Store } from '../store';
import { newId } from '../support';
import type { EgressAttempt } from './audit';
import { EgressProxy } from './egress-proxy';

/** Entry kind of one egress attempt in the run's record (a denial, or an allowed exchange that ended). */
export const EGRESS_ENTRY = 'egress.attempt';
/** Entry kind of an allowed request at its start: with no `egress.attempt` of the same id after it, it was in flight when its host died. */
export const EGRESS_STARTED = 'egress.started';

/** The store calls the proxy's records need: the audit row, and the run's entry. */
export type EgressStore = Pick<Store, 'recordEgress' | 'getRun' | 'listRuns' | 'commit' | 'recordCost' | 'listEntries'>;

/**
 * The egress proxy as the sandbox host starts it. Every attempt is written three ways: a row in the
 * store's audit trail (queryable by lease, also for attempts outside runs), an `egress.attempt`
 * entry committed on the run (what `berth logs` and the run's history show), and a log event
 * (denials at warn, so they show at the default level). The entry is an observation, not run
 * state: committed without a fence, so it never competes with the kernel's owned writes.
 */
export function egressPort(store: EgressStore, logger: Logger): EgressPort {
  const runs = new Map<string, { id: string; sessionId: string }>();
  /**
   * The run an attempt belongs to: the lease's run when it was made for one (plan runs), else the
   * newest unfinished run of the lease's session (an agent session's sandbox serves its runs one
   * at a time), else its newest run.
   */
  const runOf = async (runId: string | null, sessionId: string | null): Promise<{ id: string; sessionId: string } | undefined> => {
    if (runId) {
      const known = runs.get(runId) ?? (await store.getRun(runId));
      if (known) return runs.set(runId, { id: known.id, sessionId: known.sessionId }).get(runId);
    }
    if (!sessionId) return undefined;
    // Two reads by index, not the session's whole list (it grows with every message and MCP call).
    const run = (await store.listRuns({ sessionId, states: OPEN_RUN_STATES })).at(-1) ?? (await store.listRuns({ sessionId, newest: 1 }))[0];
    return run && { id: run.id, sessionId: run.sessionId };
  };
  const persist = async (a: EgressAttempt, sessionId: string | null, log: Logger): Promise<void> => {
    const run = await runOf(a.runId, sessionId).catch((err: unknown) => void log.error({ err }, 'could not find the run of an egress attempt'));
    const attempt = { ...a, runId: run?.id ?? a.runId };
    // Audit row first: it needs no run, so an attempt is kept even when its run cannot be found.
    await store.recordEgress(attempt).catch((err: unknown) => log.error({ err }, 'could not record egress attempt'));
    if (!run) return;
    const { runId, ...body } = attempt;
    const kind = attempt.id && attempt.endedAt === null ? EGRESS_STARTED : EGRESS_ENTRY;
    const r = await store.commit({ sessionId: run.sessionId, label: kind, actor: 'egress-proxy', entries: [{ id: newId('ent'), runId, kind, body: plainJson(body) }] });
    if (!r.ok) log.error({ conflict: r.conflict }, 'egress attempt not committed to the run');
  };
  const pending = new Set<Promise<void>>();
  const track = (w: Promise<void>) => {
    pending.add(w);
    void w.finally(() => pending.delete(w));
  };
  return {
    async start(p) {
      const log = logger.child({ runId: p.runId, sessionId: p.sessionId, leaseId: p.leaseId });
      const gatewayLedger = p.gateway && storeLedger(store, () => runOf(p.runId, p.sessionId), log);
      const gateway = p.gateway && gatewayLedger && new ModelGateway({ spec: p.gateway, ledger: gatewayLedger, log });
      const proxy = new EgressProxy({
        ...(gateway ? { gateway } : {}),
        allow: p.allow,
        overrides: p.overrides,
        peer: p.peer,
        runId: p.runId,
        leaseId: p.leaseId,
        record: (a) => {
          const written = persist(a, p.sessionId, log).catch((err: unknown) => log.error({ err }, 'could not commit egress attempt to the run'));
          track(written);
          const event = { event: 'egress', method: a.method, target: a.target, decision: a.decision, reason: a.reason, bytesOut: a.bytesOut, bytesIn: a.bytesIn };
          if (a.decision === 'deny') log.warn(event, 'egress denied');
          else if (a.endedAt === null) log.debug({ ...event, id: a.id }, 'egress started');
          else log.info(event, 'egress allowed');
          // The proxy dials an allowed request once its start is written.
          return written;
        },
      });
      await proxy.listen(p.listenHost, p.port);
      return {
        // Attempts end as connections close; their writes must land before the store may be closed.
        async close() {
          await proxy.close();
          gateway?.close();
          await gatewayLedger?.settle();
          // Destroyed tunnels report their attempt from their 'close' event, a tick later.
          await new Promise((r) => setImmediate(r));
          await Promise.all(pending);
        },
      };
    },
    async dropped(p) {
      const log = logger.child({ runId: p.runId, sessionId: p.sessionId, leaseId: p.leaseId });
      for (const d of p.attempts) {
        log.warn({ event: 'egress', method: d.proto, target: d.target, from: d.from, decision: 'deny', reason: d.reason, count: d.count }, 'egress dropped');
      }
      await Promise.all(
        p.attempts.map((d) =>
          persist({ at: d.firstAt, runId: p.runId, leaseId: p.leaseId, method: d.proto, target: d.target, decision: 'deny', reason: d.reason, bytesOut: 0, bytesIn: 0, count: d.count, id: null, endedAt: null }, p.sessionId, log),
        ),
      );
    },
  };
}
