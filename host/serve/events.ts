import type { Context } from 'hono';
import { streamSSE } from 'hono/streaming';
import type { Store } from '../store';
import type { CommitFeed } from './commit-feed';

/** Keep-alive comment interval: proxies and browsers drop an idle stream otherwise. */
const KEEPALIVE_MS = 15_000;

/**
 * Server-sent events, one `commit` event per commit (of one session, or of the whole store), whose
 * id is the store-wide commit sequence. A reconnect sends `Last-Event-ID` (the browser does it by
 * itself) or `?after=N` and gets exactly the commits after it: none missing, none twice, because
 * the stream reads the commit log after the last id it sent, never a window of time.
 */
export function commitEvents(c: Context, store: Store, feed: CommitFeed, sessionId: string | undefined) {
  const header = c.req.header('last-event-id') ?? c.req.query('after') ?? '0';
  let after = /^\d+$/.test(header) ? Number(header) : 0;
  return streamSSE(c, async (stream) => {
    const ctl = new AbortController();
    stream.onAbort(() => ctl.abort());
    // retry: how long the browser waits before reconnecting after a dropped connection.
    await stream.write('retry: 500\n\n');
    while (!ctl.signal.aborted) {
      const commits = await store.listCommitLog({ afterSeq: after, sessionId, limit: 500 });
      for (const x of commits) {
        await stream.writeSSE({ id: String(x.seq), event: 'commit', data: JSON.stringify(x) });
        after = x.seq;
      }
      if (commits.length === 500) continue;
      // Nothing of this session after `after`: wait for the store to pass its newest sequence.
      const newest = await store.lastCommitLogSeq();
      if (newest <= after || sessionId) await feed.waitBeyond(Math.max(newest, after), ctl.signal, KEEPALIVE_MS);
      if (!ctl.signal.aborted) await stream.write(': keep-alive\n\n');
    }
  });
}
