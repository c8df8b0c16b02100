import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Most characters of a note in a redirect. What an action says can quote a reason or an effect's
 * reason of any length; a 20,000-character one made a Location the server's own 16 KiB header limit
 * then refused (431). Encoded, 1,000 characters stay under 9 KiB.
 */
export const MAX_SAID = 1_000;

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
    /** The query string (no `?`) of a redirect that shows `n`, its words cut to {@link MAX_SAID} characters. */
    query(full: SaidNote): string {
      const n = { ...full, said: full.said.length > MAX_SAID ? `${full.said.slice(0, MAX_SAID - 1)}…` : full.said };
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
