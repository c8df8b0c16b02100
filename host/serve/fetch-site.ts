import type { MiddlewareHandler } from 'hono';
import { refusal } from './api-errors';

/**
 * Refuses (403 `cross_site_refused`) what a browser fetches for a page of another origin as
 * anything but a top-level navigation: an image, a script, a style, a frame, a fetch. Browsers say
 * so in `Sec-Fetch-Site` (`cross-site`; `same-site` for another port of this host, which is another
 * origin) with `Sec-Fetch-Mode`/`Sec-Fetch-Dest`. The browser would not let that page read the
 * answer, but the server did the work: any site the operator visited could make `<img src>` ask
 * for a snapshot diff (two image exports on the engine) as often as it liked, with `--no-token`
 * (no cookie needed) or with a cookie the browser sends along. A link the operator follows is a
 * `navigate` to a `document` and still opens; programs and curl send no such header.
 */
export function refuseCrossSiteLoads(): MiddlewareHandler {
  return async (c, next) => {
    const site = c.req.header('sec-fetch-site');
    if (site !== 'cross-site' && site !== 'same-site') return next();
    const navigation = c.req.header('sec-fetch-mode') === 'navigate' && c.req.header('sec-fetch-dest') === 'document' && (c.req.method === 'GET' || c.req.method === 'HEAD');
    if (navigation) return next();
    return refusal(c, 403, 'cross_site_refused', `cross-site request refused (${site} ${c.req.header('sec-fetch-dest') ?? 'fetch'})`);
  };
}
