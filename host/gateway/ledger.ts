import type { Logger } from 'pino';
import { plainJson, type Json } from '../model';
import type { Store } from '../store';
import { newId } from '../support';
import type { GatewayUsage } from './usage';

/** Entry kinds the gateway writes on the run: each request, each answer, each refusal. */
export const GATEWAY_ENTRY = { request: 'gateway.request', response: 'gateway.response', refused: 'gateway.refused' } as const;
export type GatewayEntryKind = (typeof GATEWAY_ENTRY)[keyof typeof GATEWAY_ENTRY];

/** The run a sandbox's requests count against now (a session's sandbox serves its runs in turn). */
export type GatewayRunOf = () => Promise<{ id: string; sessionId: string } | undefined>;

/** What the gateway records and counts, per run. */
export interface GatewayLedger {
  /** The run a request counts against now, and the tokens it has spent through the gateway so far. */
  account(): Promise<{ runId: string | null; spentTokens: number }>;
  /** Commits an entry on the run in the background (an observation, like an egress attempt); `settle` waits for it. */
  entry(runId: string | null, kind: GatewayEntryKind, body: object): void;
  /** Counts an answer's tokens against its run's budget at once, and records them as the run's cost. */
  spend(runId: string | null, model: string, usage: GatewayUsage | undefined): void;
  settle(): Promise<void>;
}

export type GatewayStore = Pick<Store, 'commit' | 'recordCost' | 'listEntries'>;

/**
 * The ledger on the store. The spent tokens of a run are read back from its `gateway.response`
 * entries once, on its first request here (so a budget holds across host restarts), then counted
 * in memory as answers arrive, before their entries are written.
 */
export function storeLedger(store: GatewayStore, runOf: GatewayRunOf, log: Logger, now: () => number = Date.now): GatewayLedger {
  const spent = new Map<string, Promise<number>>();
  const sessions = new Map<string, string>();
  const pending = new Set<Promise<unknown>>();
  const track = (w: Promise<unknown>) => {
    pending.add(w);
    void w.finally(() => pending.delete(w));
  };
  const load = async (runId: string, sessionId: string): Promise<number> => {
    const entries = await store.listEntries(sessionId, { runId });
    let n = 0;
    for (const e of entries) {
      if (e.kind !== GATEWAY_ENTRY.response) continue;
      const u = (e.body as { usage?: GatewayUsage | null }).usage;
      if (u) n += u.prompt + u.completion;
    }
    return n;
  };
  return {
    async account() {
      const run = await runOf();
      if (!run) return { runId: null, spentTokens: 0 };
      sessions.set(run.id, run.sessionId);
      let s = spent.get(run.id);
      if (!s) spent.set(run.id, (s = load(run.id, run.sessionId)));
      return { runId: run.id, spentTokens: await s };
    },
    entry(runId, kind, body) {
      const sessionId = runId && sessions.get(runId);
      if (!runId || !sessionId) return;
      const w = store
        .commit({ sessionId, label: kind, actor: 'model-gateway', entries: [{ id: newId('ent'), runId, kind, body: plainJson(body) as Json }] })
        .then((r) => {
          if (!r.ok) log.error({ conflict: r.conflict, kind }, 'model gateway entry not committed to the run');
        })
        .catch((err: unknown) => log.error({ err, kind }, 'could not commit model gateway entry'));
      track(w);
    },
    spend(runId, model, usage) {
      if (!runId) return;
      const tokens = usage ? usage.prompt + usage.completion : 0;
      const before = spent.get(runId) ?? Promise.resolve(0);
      spent.set(runId, before.then((n) => n + tokens));
      const meters = { 'model.requests': 1, ...(usage ? { 'tokens.prompt': usage.prompt, 'tokens.completion': usage.completion, 'tokens.cached': usage.cached } : {}) };
      track(store.recordCost({ runId, at: now(), key: model, meters }).catch((err: unknown) => log.error({ err }, 'could not record model gateway cost')));
    },
    async settle() {
      while (pending.size) await Promise.all([...pending]);
    },
  };
}
