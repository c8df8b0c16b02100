import { BerthError } from '../errors';
import type { Entry, Run } from '../model';
import type { ListedRun } from '../store';
import type { OutputChunk } from '../store/output';
import { AttemptTracker, type InterruptedEvent, type OutputEvent } from '../output';
import type { FollowOptions, RunEvent, RunOrOutputEvent } from './events';
import type { ReconcileChoice } from './reconcile';

/** What {@link connect} takes: the `berth serve` address and its token (null for a loopback server started with `--no-token`). */
export interface ConnectOptions {
  url: string;
  token: string | null;
  /** How long to wait before reconnecting a dropped event stream (default 500 ms). */
  reconnectMs?: number;
}

/** A page-read option: rows per request (1-500; the server's default 100). */
export interface PageOptions {
  pageSize?: number;
  signal?: AbortSignal;
}

/** What a remote runs list is filtered by: states, tags (every one), a search over id and name, a creation window (`YYYY-MM-DD` days, inclusive, or ISO times). */
export interface RemoteRunFilter extends PageOptions {
  states?: Run['state'][];
  tags?: string[];
  search?: string;
  from?: string;
  to?: string;
}

type Said = { said: string; forkRunId?: string | null };
const SETTLED: readonly Run['state'][] = ['completed', 'failed', 'cancelled', 'compensated', 'needs_reconciliation'];
/**
 * Waits `ms`, or until `signal` aborts. The abort listener goes with the pause: one follow or wait
 * holds one signal for hours and pauses at every poll and reconnect.
 */
const pause = (ms: number, signal?: AbortSignal) => new Promise<void>((resolve) => {
  if (signal?.aborted) return resolve();
  const done = () => {
    clearTimeout(t);
    signal?.removeEventListener('abort', done);
    resolve();
  };
  const t = setTimeout(done, ms);
  signal?.addEventListener('abort', done, { once: true });
});

/**
 * A signal for one request that aborts with `signal`, and its unlink. fetch's own listener on a
 * signal it is given leaves only when the request is garbage collected: given a caller's long-lived
 * signal, every poll, page and reconnect would add one more to it.
 */
function requestSignal(signal: AbortSignal | undefined): { signal: AbortSignal | undefined; release: () => void } {
  if (!signal) return { signal: undefined, release: () => {} };
  const ctl = new AbortController();
  const abort = () => ctl.abort(signal.reason);
  if (signal.aborted) abort();
  else signal.addEventListener('abort', abort, { once: true });
  return { signal: ctl.signal, release: () => signal.removeEventListener('abort', abort) };
}

/**
 * A client of `berth serve`'s `/api/v1` with the host's interface for what makes sense remotely:
 * submit, follow (server-sent events resumed with `Last-Event-ID` across dropped connections and
 * server restarts), wait, cancel, approve/deny, reconcile, accept/reject, fork. Refusals arrive as
 * the server's `BerthError`s (code, retryable, ids); a wrong token is `unauthorized`.
 */
export class RemoteBerth {
  constructor(private readonly o: ConnectOptions) {}

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    return { ...(this.o.token ? { authorization: `Bearer ${this.o.token}` } : {}), ...extra };
  }

  private async call<T>(method: 'GET' | 'POST', path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
    let res: Response;
    const request = requestSignal(signal);
    let text: string;
    try {
      try {
        res = await fetch(new URL(path, this.o.url), { method, headers: this.headers(method === 'POST' ? { 'content-type': 'application/json' } : {}), body: method === 'POST' ? JSON.stringify(body ?? {}) : undefined, signal: request.signal });
      } catch (err) {
        if (signal?.aborted) throw err;
        throw new BerthError('server_unreachable', `berth serve at ${this.o.url} did not answer: ${(err as Error).message}`, { retryable: true, cause: err });
      }
      text = await res.text();
    } finally {
      request.release();
    }
    const json = (() => { try { return JSON.parse(text) as unknown; } catch { return undefined; } })();
    if (!res.ok) {
      const e = (json as { error?: { code?: string; message?: string; retryable?: boolean; ids?: Record<string, string> } } | undefined)?.error;
      throw new BerthError(e?.code ?? `http_${res.status}`, e?.message ?? `${res.status}: ${text.slice(0, 200)}`, { retryable: e?.retryable ?? res.status >= 500, ids: e?.ids, details: { status: res.status } });
    }
    return json as T;
  }

  /** Submits a plan file that is on the server's machine, for its workers. */
  submitPlan(plan: string, o: { requestId?: string; tags?: string[] } = {}): Promise<{ run: Run; created: boolean }> {
    return this.call('POST', '/api/v1/runs', { plan, ...o });
  }

  async get(runId: string): Promise<Run> {
    return (await this.call<{ run: Run }>('GET', `/api/v1/runs/${encodeURIComponent(runId)}`)).run;
  }

  /** Every run that matches, oldest first: the pages read one after another (see {@link runs}). */
  async list(o: RemoteRunFilter = {}): Promise<ListedRun[]> {
    const out: ListedRun[] = [];
    for await (const r of this.runs(o)) out.push(r);
    return out;
  }

  /** The runs that match, oldest first, a page (`pageSize`, at most 500) fetched at a time as the caller reads on. */
  runs(o: RemoteRunFilter = {}): AsyncGenerator<ListedRun> {
    const q = new URLSearchParams();
    for (const s of o.states ?? []) q.append('state', s);
    for (const t of o.tags ?? []) q.append('tag', t);
    if (o.search) q.set('q', o.search);
    if (o.from) q.set('from', o.from);
    if (o.to) q.set('to', o.to);
    return this.pages<ListedRun>('/api/v1/runs', q, 'runs', o);
  }

  /** The run's entries in commit order, paged. */
  entries(runId: string, o: PageOptions = {}): AsyncGenerator<Entry> {
    return this.pages<Entry>(`/api/v1/runs/${encodeURIComponent(runId)}/entries`, new URLSearchParams(), 'entries', o);
  }

  /** The run's stored output chunks in output order (what has been written so far), paged. */
  output(runId: string, o: PageOptions = {}): AsyncGenerator<OutputChunk> {
    return this.pages<OutputChunk>(`/api/v1/runs/${encodeURIComponent(runId)}/output`, new URLSearchParams(), 'chunks', o);
  }

  /** Follows `nextCursor` until the last page: only one page is held at a time. */
  private async *pages<T>(path: string, q: URLSearchParams, key: string, o: PageOptions): AsyncGenerator<T> {
    let cursor: string | null = null;
    do {
      const p = new URLSearchParams(q);
      if (o.pageSize) p.set('limit', String(o.pageSize));
      if (cursor) p.set('cursor', cursor);
      const page: Record<string, unknown> & { nextCursor: string | null } = await this.call('GET', `${path}${p.size ? `?${p}` : ''}`, undefined, o.signal);
      yield* page[key] as T[];
      cursor = page.nextCursor;
    } while (cursor);
  }

  /**
   * The run's commits, each once, until it settles: a dropped stream (or a restarted server) is
   * reconnected with `Last-Event-ID`, so nothing is missed or repeated. With `output: true` also
   * the run's live output chunk by chunk while it is printed, and an `interrupted` event for an
   * attempt a crash cut off (after its partial output).
   */
  events(runId: string, o: FollowOptions & { output: true }): AsyncGenerator<RunOrOutputEvent>;
  events(runId: string, o?: FollowOptions): AsyncGenerator<RunEvent>;
  async *events(runId: string, o: FollowOptions = {}): AsyncGenerator<RunOrOutputEvent> {
    let after = o.afterSeq ?? 0;
    let afterOutput = o.afterOutputSeq ?? 0;
    const attempts = new AttemptTracker();
    const path = `/api/v1/runs/${encodeURIComponent(runId)}/events${o.output ? '?output=1' : ''}`;
    for (;;) {
      if (o.signal?.aborted) return;
      // Released as the attempt ends, however it ends (the end event, an error, the caller's break).
      const request = requestSignal(o.signal);
      try {
        let res: Response | undefined;
        try {
          const last = o.output ? `${after}.${afterOutput}` : String(after);
          res = await fetch(new URL(path, this.o.url), { headers: this.headers({ 'last-event-id': last, accept: 'text/event-stream' }), signal: request.signal });
        } catch {
          // The server is restarting, or the network dropped: try again after a pause.
        }
        if (res && !res.ok) {
          await this.call('GET', `/api/v1/runs/${encodeURIComponent(runId)}`); // throws the typed error
          throw new BerthError(`http_${res.status}`, `event stream of ${runId}: ${res.status}`);
        }
        if (res?.body) {
          let buf = '';
          const decoder = new TextDecoder();
          try {
            for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
              buf += decoder.decode(chunk, { stream: true });
              let cut: number;
              while ((cut = buf.indexOf('\n\n')) >= 0) {
                const block = buf.slice(0, cut);
                buf = buf.slice(cut + 2);
                const field = (name: string) => block.split('\n').filter((l) => l.startsWith(`${name}:`)).map((l) => l.slice(name.length + 1).replace(/^ /, '')).join('\n');
                const event = field('event');
                if (event === 'end') {
                  yield* attempts.settle();
                  return;
                }
                if (event === 'commit') {
                  const e = JSON.parse(field('data')) as Omit<RunEvent, 'type'>;
                  if (e.seq <= after) continue;
                  after = e.seq;
                  yield { ...e, type: 'commit' };
                } else if (event === 'output' && o.output) {
                  const e = JSON.parse(field('data')) as OutputEvent;
                  if (e.seq <= afterOutput) continue;
                  afterOutput = e.seq;
                  const { type: _t, ...chunk } = e;
                  yield* attempts.see(chunk);
                } else if (event === 'interrupted' && o.output) {
                  const told = attempts.adopt(JSON.parse(field('data')) as InterruptedEvent);
                  if (told) yield told;
                }
              }
            }
          } catch {
            // Dropped mid-stream: reconnect after the last id seen.
          }
        }
      } finally {
        request.release();
      }
      if (o.signal?.aborted) return;
      await pause(this.o.reconnectMs ?? 500, o.signal);
    }
  }

  /** Resolves once the run settles (polling the run). */
  async wait(runId: string, o: { signal?: AbortSignal; pollMs?: number } = {}): Promise<Run> {
    for (;;) {
      o.signal?.throwIfAborted();
      const run = await this.get(runId).catch((err: unknown) => {
        if (err instanceof BerthError && err.retryable) return undefined;
        throw err;
      });
      if (run && SETTLED.includes(run.state)) return run;
      await pause(o.pollMs ?? 500, o.signal);
    }
  }

  cancel(runId: string): Promise<Said> {
    return this.call('POST', `/api/v1/runs/${encodeURIComponent(runId)}/cancel`, {});
  }
  approve(runId: string, callOrApprovalId: string, o: { digest?: string } = {}): Promise<Said> {
    return this.call('POST', `/api/v1/runs/${encodeURIComponent(runId)}/approve`, { id: callOrApprovalId, ...o });
  }
  deny(runId: string, callOrApprovalId: string): Promise<Said> {
    return this.call('POST', `/api/v1/runs/${encodeURIComponent(runId)}/deny`, { id: callOrApprovalId });
  }
  reconcile(runId: string, choice: Omit<ReconcileChoice, 'verify'>): Promise<Said> {
    return this.call('POST', `/api/v1/runs/${encodeURIComponent(runId)}/reconcile`, choice);
  }
  accept(runId: string): Promise<Said> {
    return this.call('POST', `/api/v1/runs/${encodeURIComponent(runId)}/accept`, {});
  }
  reject(runId: string, reason: string): Promise<Said> {
    return this.call('POST', `/api/v1/runs/${encodeURIComponent(runId)}/reject`, { reason });
  }
  fork(runId: string, at: string): Promise<Said> {
    return this.call('POST', `/api/v1/runs/${encodeURIComponent(runId)}/fork`, { at });
  }
}

/** A client of a `berth serve` elsewhere (see {@link RemoteBerth}). */
export function connect(o: ConnectOptions): RemoteBerth {
  return new RemoteBerth(o);
}
