import { createHmac, timingSafeEqual } from 'node:crypto';

/** What an action said, and the run a fork made, as the run page shows them after the action's redirect. */
export interface SaidNote {
  said: string;
  forked: string | null;
}

/**
 * What an action said travels in its redirect's URL (`said`, `forked`). Unsigned, any page of
 * another site could link an operator to a run page showing words of its choosing in the box
 * where the server reports what it did ("approved. Now paste: curl … | sh") and a link to a run
 * of its choosing. The URL carries a MAC under the server's secret, and a note without a valid one
 * is not shown.
 */
export function saidNotes(secret: string) {
  const mac = (n: SaidNote) => createHmac('sha256', secret).update(`berth-serve-said\0${n.said}\0${n.forked ?? ''}`).digest('hex');
  return {
    /** The query string (no `?`) of a redirect that shows `n`. */
    query(n: SaidNote): string {
      return `said=${encodeURIComponent(n.said)}${n.forked ? `&forked=${encodeURIComponent(n.forked)}` : ''}&sig=${mac(n)}`;
    },
    /** The note a page URL carries, when this server signed it. */
    read(q: { said?: string; forked?: string; sig?: string }): SaidNote | undefined {
      if (!q.said || !q.sig) return undefined;
      const n = { said: q.said, forked: q.forked || null };
      const want = Buffer.from(mac(n));
      const got = Buffer.from(q.sig);
      return want.length === got.length && timingSafeEqual(want, got) ? n : undefined;
    },
  };
}
