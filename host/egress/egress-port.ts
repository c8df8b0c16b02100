import type { Logger } from 'pino';
import type { Json } from '../model';
import type { EgressPort } from '../sandbox/sandbox-egress';
import type { Store } from '../store';
import { newId } from '../support';
import type { EgressAttempt } from './audit';
import { EgressProxy } from './egress-proxy';

/** Entry kind of one egress attempt in the run's record. */
export const EGRESS_ENTRY = 'egress.attempt';

/** The store calls the proxy's records need: the audit row, and the run's entry. */
export type EgressStore = Pick<Store, 'recordEgress' | 'getRun' | 'commit'>;

/**
 * The egress proxy as the sandbox host starts it. Every attempt is written three ways: a row in the
 * store's audit trail (queryable by lease, also for attempts outside runs), an `egress.attempt`
 * entry committed on the run (what `berth logs` and the run's history show), and a log event
 * (denials at warn, so they show at the default level). The entry is an observation, not run
 * state: committed without a fence, so it never competes with the kernel's owned writes.
 */
export function egressPort(store: EgressStore, logger: Logger): EgressPort {
  const sessions = new Map<string, string>();
  const commitEntry = async (a: EgressAttempt): Promise<void> => {
    if (!a.runId) return;
    let sessionId = sessions.get(a.runId);
    if (!sessionId) {
      sessionId = (await store.getRun(a.runId))?.sessionId;
      if (!sessionId) return;
      sessions.set(a.runId, sessionId);
    }
    const { runId, ...body } = a;
    const r = await store.commit({ sessionId, label: 'egress.attempt', actor: 'egress-proxy', entries: [{ id: newId('ent'), runId, kind: EGRESS_ENTRY, body: body as unknown as Json }] });
    if (!r.ok) throw new Error(`egress entry refused: ${r.conflict.kind}`);
  };
  const pending = new Set<Promise<void>>();
  const track = (w: Promise<void>) => {
    pending.add(w);
    void w.finally(() => pending.delete(w));
  };
  return {
    async start(p) {
      const log = logger.child({ runId: p.runId, leaseId: p.leaseId });
      const proxy = new EgressProxy({
        allow: p.allow,
        allowPrivate: p.allowPrivate,
        runId: p.runId,
        leaseId: p.leaseId,
        record: (a) => {
          track(store.recordEgress(a).catch((err: unknown) => log.error({ err }, 'could not record egress attempt')));
          track(commitEntry(a).catch((err: unknown) => log.error({ err }, 'could not commit egress attempt to the run')));
          const event = { event: 'egress', method: a.method, target: a.target, decision: a.decision, reason: a.reason, bytesOut: a.bytesOut, bytesIn: a.bytesIn };
          if (a.decision === 'deny') log.warn(event, 'egress denied');
          else log.info(event, 'egress allowed');
        },
      });
      await proxy.listen(p.listenHost, p.port);
      return {
        // Attempts end as connections close; their writes must land before the store may be closed.
        async close() {
          await proxy.close();
          // Destroyed tunnels report their attempt from their 'close' event, a tick later.
          await new Promise((r) => setImmediate(r));
          await Promise.all(pending);
        },
      };
    },
  };
}
