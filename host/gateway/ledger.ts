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
  /**
   * Commits an entry on the run in the background (an observation, like an egress attempt); `settle`
   * waits for it. A function body is built only when written, off the request's path.
   */
  entry(runId: string | null, kind: GatewayEntryKind, body: object | (() => object)): void;
  /**
   * Counts an answer's tokens against its run's budget at once, and records them as the run's cost.
   * An answer without usage counts `estimatedTokens` against the budget only (cost is what was reported).
   */
  spend(runId: string | null, model: string, usage: GatewayUsage | undefined, estimatedTokens?: number): void;
  settle(): Promise<void>;
}

export type GatewayStore = Pick<Store, 'commit' | 'recordCost' | 'listEntries'>;

/** How long records wait to be written together: one commit per batch, not per request. */
const FLUSH_MS = 250;

/**
 * The ledger on the store. The spent tokens of a run are read back from its `gateway.response`
 * entries once, on its first request here (so a budget holds across host restarts), then counted
 * in memory as answers arrive, before their entries are written. Entries and cost samples are
 * written in batches a moment later: the SQLite store commits synchronously (with an fsync), and a
 * commit per request on the proxy's thread made a completion many times slower. The price: a host
 * that dies loses the last moment's records, and a restarted budget counts without them.
 */
export function storeLedger(store: GatewayStore, runOf: GatewayRunOf, log: Logger, now: () => number = Date.now): GatewayLedger {
  const spent = new Map<string, Promise<number>>();
  const sessions = new Map<string, string>();
  let entries: Array<{ sessionId: string; runId: string; kind: GatewayEntryKind; body: object | (() => object) }> = [];
  let costs = new Map<string, { runId: string; model: string; requests: number; prompt: number; completion: number; cached: number; reported: boolean }>();
  let timer: NodeJS.Timeout | undefined;
  let flushing: Promise<void> = Promise.resolve();
  const load = async (runId: string, sessionId: string): Promise<number> => {
    const all = await store.listEntries(sessionId, { runId });
    let n = 0;
    for (const e of all) {
      if (e.kind !== GATEWAY_ENTRY.response) continue;
      const b = e.body as { usage?: GatewayUsage | null; estimatedTokens?: number };
      if (b.usage) n += b.usage.prompt + b.usage.completion;
      else if (typeof b.estimatedTokens === 'number') n += b.estimatedTokens;
    }
    return n;
  };
  const write = async (batch: typeof entries, sums: typeof costs): Promise<void> => {
    const bySession = new Map<string, typeof entries>();
    for (const e of batch) bySession.set(e.sessionId, [...(bySession.get(e.sessionId) ?? []), e]);
    for (const [sessionId, list] of bySession) {
      const r = await store
        .commit({ sessionId, label: 'gateway', actor: 'model-gateway', entries: list.map((e) => ({ id: newId('ent'), runId: e.runId, kind: e.kind, body: plainJson(typeof e.body === 'function' ? e.body() : e.body) as Json })) })
        .catch((err: unknown) => void log.error({ err }, 'could not commit model gateway entries'));
      if (r && !r.ok) log.error({ conflict: r.conflict }, 'model gateway entries not committed to the run');
    }
    for (const c of sums.values()) {
      const meters = { 'model.requests': c.requests, ...(c.reported ? { 'tokens.prompt': c.prompt, 'tokens.completion': c.completion, 'tokens.cached': c.cached } : {}) };
      await store.recordCost({ runId: c.runId, at: now(), key: c.model, meters }).catch((err: unknown) => log.error({ err }, 'could not record model gateway cost'));
    }
  };
  const flush = (): Promise<void> => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    const batch = entries;
    const sums = costs;
    entries = [];
    costs = new Map();
    // Batches are written in order, one at a time.
    flushing = flushing.then(() => (batch.length || sums.size ? write(batch, sums) : undefined));
    return flushing;
  };
  const soon = () => {
    timer ??= setTimeout(() => void flush(), FLUSH_MS);
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
      entries.push({ sessionId, runId, kind, body });
      soon();
    },
    spend(runId, model, usage, estimatedTokens) {
      if (!runId) return;
      const tokens = usage ? usage.prompt + usage.completion : (estimatedTokens ?? 0);
      const before = spent.get(runId) ?? Promise.resolve(0);
      spent.set(runId, before.then((n) => n + tokens));
      const key = `${runId}\0${model}`;
      const c = costs.get(key) ?? { runId, model, requests: 0, prompt: 0, completion: 0, cached: 0, reported: false };
      c.requests += 1;
      if (usage) {
        c.prompt += usage.prompt;
        c.completion += usage.completion;
        c.cached += usage.cached;
        c.reported = true;
      }
      costs.set(key, c);
      soon();
    },
    settle: flush,
  };
}
