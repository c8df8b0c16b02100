import type { AddressInfo } from 'node:net';
import { isIP } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import { BerthError } from '../errors';
import { serveApp } from './app';
import { CommitFeed } from './commit-feed';
import type { ServeDeps } from './deps';
import { answerClientErrors } from '../support/client-errors';
import { allowedHosts } from '../support/host-header';

/** True for 127.0.0.0/8, ::1 and `localhost`. */
export function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return host === '::1' || host === '[::1]';
}

/** A running `berth serve`. */
export interface ServeHandle {
  url: string;
  port: number;
  /** Drops every open connection (event streams included) but keeps listening: what a network cut does. */
  dropConnections(): void;
  close(): Promise<void>;
}

/**
 * Starts the server. Refuses a non-loopback address without a token (`serve_needs_token`): the
 * pages act on runs. Every long-lived stream ends when `signal` aborts.
 */
export async function startServe(deps: ServeDeps, opts: { host: string; port: number; signal?: AbortSignal }): Promise<ServeHandle> {
  if (!deps.token && !isLoopback(opts.host)) {
    throw new BerthError('serve_needs_token', `refusing to serve ${opts.host} without a token: only loopback addresses may go without one (drop --no-token)`);
  }
  const feed = new CommitFeed(deps.store, deps.pollMs);
  // Filled once listening: the port may be 0 until then, and no request arrives before.
  let hosts: ReadonlySet<string> = new Set();
  let url = '';
  const app = serveApp(deps, feed, { allowed: () => hosts, url: () => url });
  const server = await new Promise<ServerType>((resolve, reject) => {
    const s = serve({ fetch: app.fetch, hostname: opts.host, port: opts.port }, () => resolve(s));
    s.once('error', reject);
  });
  const port = (server.address() as AddressInfo).port;
  hosts = allowedHosts(opts.host, port);
  const http = server as unknown as import('node:http').Server;
  // JSON under /api (and when the path is not known: a person reads it too), text for a page.
  answerClientErrors(http, (r, path) =>
    path === undefined || path.startsWith('/api/')
      ? { contentType: 'application/json', body: JSON.stringify({ error: { code: r.code, message: r.message, retryable: false, ids: {} } }) }
      : { contentType: 'text/plain; charset=UTF-8', body: `${r.status}: ${r.message}` },
  );
  const close = async () => {
    feed.close();
    http.closeAllConnections?.();
    await new Promise<void>((r) => server.close(() => r()));
  };
  opts.signal?.addEventListener('abort', () => void close(), { once: true });
  const shown = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
  url = `http://${shown}:${port}`;
  return { url, port, dropConnections: () => http.closeAllConnections?.(), close };
}
