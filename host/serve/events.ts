import type { Context } from 'hono';
import { streamSSE } from 'hono/streaming';
import type { Store } from '../store';
import type { CommitFeed } from './commit-feed';

/** Keep-alive comment interval: proxies and browsers drop an idle stream otherwise. */
const KEEPALIVE_MS = 15_000;
const PAGE = 500;

/**
 * Server-sent events, one `commit` event per commit (of one session, or of the whole store), whose
 * id is the store-wide commit sequence. A reconnect sends `Last-Event-ID` (the browser does it by
 * itself) or `?after=N` and gets exactly the commits after it: none missing, none twice, because
 * the stream reads the commit log after the last id it sent, never a window of time.
 */
export function commitEvents(c: Context, store: Store, feed: CommitFeed, sessionId: string | undefined) {
  let after = resumePoint(c);
  return streamSSE(c, async (stream) => {
    const ctl = new AbortController();
    stream.onAbort(() => ctl.abort());
    // retry: how long the browser waits before reconnecting after a dropped connection.
    await stream.write('retry: 500\n\n');
    // Everything up to `covered` has been sent (or is not this stream's).
    let covered = after;
    while (!ctl.signal.aborted) {
      let batch = await feed.since(after, sessionId);
      if (!batch) {
        // Further behind than the feed holds: read the store. What the feed had seen before this
        // read is committed, so the read saw it: up to there the answer is complete.
        const seen = feed.newest;
        const commits = await store.listCommitLog({ afterSeq: after, sessionId, limit: PAGE });
        batch = { commits, covered: commits.length === PAGE ? commits[commits.length - 1]!.seq : Math.max(after, seen) };
      }
      for (const x of batch.commits) {
        await stream.writeSSE({ id: String(x.seq), event: 'commit', data: JSON.stringify(x) });
        after = x.seq;
      }
      covered = Math.max(batch.covered, after);
      if (!(await feed.waitBeyond(covered, ctl.signal, KEEPALIVE_MS)) && !ctl.signal.aborted) await stream.write(': keep-alive\n\n');
    }
  });
}

/** Where a (re)connecting event stream resumes: after `Last-Event-ID`, else `?after=N`, else from the start. */
export function resumePoint(c: Context): number {
  const header = c.req.header('last-event-id') ?? c.req.query('after') ?? '0';
  return /^\d+$/.test(header) ? Number(header) : 0;
}
