import { duration } from '../api/duration';
import { BerthError } from '../errors';
import type { SessionOwner, Store } from '../store';

/**
 * The refusal of a call on a session another live Berth process holds (another `berth mcp`, a
 * `berth chat`, a worker), said so an MCP client can act on it. The kernel's `run_owned` is
 * written for the CLI: "take its run over with berth resume RUN --take-over", a command an MCP
 * client cannot give, and it reached the client as an internal error (-32603). This one names the
 * session, who holds it and what to do (wait for that process to end: the next call here then
 * takes the session at once; berth mcp has no take-over option), under a stable code.
 */
export async function servedElsewhere(store: Store, refused: BerthError): Promise<BerthError> {
  const sessionId = refused.ids.sessionId;
  if (!sessionId) return refused;
  const owner = ((refused.details?.owner as SessionOwner | undefined) ?? (await store.getSessionOwner(sessionId).catch(() => undefined))) || undefined;
  const now = await store.databaseNow().catch(() => Date.now());
  const who = owner ? `host ${owner.holder}${owner.pid ? `, pid ${owner.pid}` : ''}` : 'another host';
  const live = owner ? ` (heartbeat ${duration(Math.max(0, now - owner.heartbeatAt))} ago, lease valid ${duration(Math.max(0, owner.leaseUntil - now))} more)` : '';
  return new BerthError(
    'session_served_elsewhere',
    `session ${sessionId} is served by another live Berth process: ${who}${live}, e.g. another berth mcp server or a berth chat; ` +
      'a session is driven by one process at a time, so this call did not run. Wait until that process ends (a berth mcp server ends when its client disconnects) and call again: ' +
      'this server then takes the session over (at once on the same machine, on another one once that lease runs out). berth mcp has no option to take over a session a live process holds.',
    {
      retryable: true,
      ids: { sessionId, ...(refused.ids.runId ? { runId: refused.ids.runId } : {}) },
      details: { owner: owner ? { host: owner.holder, pid: owner.pid, heartbeatAgoMs: Math.max(0, now - owner.heartbeatAt), leaseValidForMs: Math.max(0, owner.leaseUntil - now) } : null },
      cause: refused,
    },
  );
}
