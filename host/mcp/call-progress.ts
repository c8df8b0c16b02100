import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js';

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** Well below the SDK client's default request timeout (60 s), so a client that resets it on progress never sees it pass. */
export const DEFAULT_PROGRESS_MS = 5_000;
const MIN_PROGRESS_MS = 50;

/** The interval of a server: `BERTH_MCP_PROGRESS_MS` when set (at least 50), else {@link DEFAULT_PROGRESS_MS}. */
export function progressIntervalMs(env: NodeJS.ProcessEnv = process.env): number {
  const v = Number(env.BERTH_MCP_PROGRESS_MS);
  return env.BERTH_MCP_PROGRESS_MS && Number.isFinite(v) ? Math.max(MIN_PROGRESS_MS, v) : DEFAULT_PROGRESS_MS;
}

/**
 * Sends `notifications/progress` every `everyMs` while a call runs, when its request asked for them
 * (`_meta.progressToken`): a client that resets its own request timeout on progress (the SDK's
 * `resetTimeoutOnProgress`) then keeps waiting for a command longer than that timeout, where
 * before it gave up on it (the call ran on: -32001 is no cancel, client-cancel.ts). `progress`
 * counts the notifications (it must grow; there is no total to give). Returns the stop; a request
 * that ended (answered, cancelled, its client gone) gets no more.
 */
export function reportProgress(extra: Extra, tool: string, everyMs: number): () => void {
  const token = extra._meta?.progressToken;
  if (token === undefined || extra.signal.aborted) return () => {};
  const started = Date.now();
  let sent = 0;
  const timer = setInterval(() => {
    sent += 1;
    const params = { progressToken: token, progress: sent, message: `${tool} running for ${Math.round((Date.now() - started) / 1000)} s` };
    // A transport that closed meanwhile: the request is ending too, and its stop follows.
    extra.sendNotification({ method: 'notifications/progress', params }).catch(() => {});
  }, everyMs);
  const stop = () => clearInterval(timer);
  extra.signal.addEventListener('abort', stop, { once: true });
  return stop;
}
