import type { Context } from 'hono';
import { streamSSE } from 'hono/streaming';
import type { Store } from '../store';
import type { CommitFeed } from './commit-feed';
import { resumePoint } from './events';

const KEEPALIVE_MS = 15_000;
const PAGE = 500;

/**
 * Server-sent events of one run's live output (host/output): one `output` event per stored chunk,
 * whose id is the chunk's store-wide output sequence, so a reconnect (`Last-Event-ID`, `?after=N`)
 * gets exactly the chunks after the last it had. The commit feed's tick says when output moved;
 * only then does the stream read its run's chunks.
 */
export function outputEvents(c: Context, store: Store, feed: CommitFeed, runId: string) {
  let after = resumePoint(c);
  return streamSSE(c, async (stream) => {
    const ctl = new AbortController();
    stream.onAbort(() => ctl.abort());
    await stream.write('retry: 500\n\n');
    while (!ctl.signal.aborted) {
      const seen = feed.newestOutput;
      const chunks = await store.listOutput({ runId, afterSeq: after, limit: PAGE });
      for (const x of chunks) {
        await stream.writeSSE({ id: String(x.seq), event: 'output', data: JSON.stringify({ seq: x.seq, source: x.source, label: x.label, attempt: x.attempt, channel: x.channel, text: x.text, cutBytes: x.cutBytes, at: x.at }) });
        after = x.seq;
      }
      if (chunks.length === PAGE) continue;
      // Everything up to what the feed had seen before the read is sent (or another run's).
      if (!(await feed.waitOutputBeyond(Math.max(after, seen), ctl.signal, KEEPALIVE_MS)) && !ctl.signal.aborted) await stream.write(': keep-alive\n\n');
    }
  });
}
