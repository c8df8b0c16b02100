import type { Logger } from 'pino';
import type { EgressPort } from '../sandbox/sandbox-egress';
import type { EgressAuditRecords } from './audit';
import { EgressProxy } from './egress-proxy';

/**
 * The egress proxy as the sandbox host starts it: every attempt goes to the store's audit trail
 * and to the log as a run event (denials at warn, so they show at the default level).
 */
export function egressPort(audit: EgressAuditRecords, logger: Logger): EgressPort {
  return {
    async start(p) {
      const log = logger.child({ runId: p.runId, leaseId: p.leaseId });
      const proxy = new EgressProxy({
        allow: p.allow,
        allowPrivate: p.allowPrivate,
        runId: p.runId,
        leaseId: p.leaseId,
        record: (a) => {
          audit.recordEgress(a).catch((err: unknown) => log.error({ err }, 'could not record egress attempt'));
          const event = { event: 'egress', method: a.method, target: a.target, decision: a.decision, reason: a.reason, bytesOut: a.bytesOut, bytesIn: a.bytesIn };
          if (a.decision === 'deny') log.warn(event, 'egress denied');
          else log.info(event, 'egress allowed');
        },
      });
      await proxy.listen(p.listenHost, p.port);
      return proxy;
    },
  };
}
