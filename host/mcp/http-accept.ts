import type { IncomingMessage } from 'node:http';

/** The two types a POST to /mcp may be answered in. */
export interface Acceptable {
  json: boolean;
  sse: boolean;
  /**
   * The client names `text/event-stream` itself: only such a client gets its progress as a stream
   * when it also takes JSON. `*\/*` is what fetch, curl and Python's requests send by default, and a
   * program reading the answer as JSON must not be handed a stream because it asked for progress.
   */
  sseNamed: boolean;
}

const JSON_TYPE = 'application/json';
const SSE_TYPE = 'text/event-stream';
/** What the SDK's transport insists on seeing (both, by substring) before it takes a POST. */
const BOTH = `${JSON_TYPE}, ${SSE_TYPE}`;

/**
 * The q a client's Accept gives a media type: that of the most specific range naming it
 * (`type/sub` over `type/*` over `*\/*`, as RFC 9110 12.5.1 has it), 0 when none does.
 */
function qualityOf(ranges: Array<{ range: string; q: number }>, type: string): { rank: number; q: number } {
  const [main] = type.split('/');
  let best = { rank: -1, q: 0 };
  for (const r of ranges) {
    const rank = r.range === type ? 2 : r.range === `${main}/*` ? 1 : r.range === '*/*' ? 0 : -1;
    if (rank > best.rank) best = { rank, q: r.q };
  }
  return best;
}

/**
 * Which of JSON and SSE a request's Accept header takes. No header takes anything (RFC 9110:
 * "a request without any Accept header field implies that the user agent will accept any media
 * type"), as Python's urllib sends; `*\/*` (curl, fetch) and `application/json` alone take JSON.
 */
export function acceptable(accept: string | undefined): Acceptable {
  if (accept === undefined || accept.trim() === '') return { json: true, sse: true, sseNamed: false };
  const ranges = accept.split(',').flatMap((part) => {
    const [range, ...params] = part.split(';').map((s) => s.trim().toLowerCase());
    if (!range) return [];
    const q = params.map((p) => /^q=([0-9.]+)$/.exec(p)?.[1]).find((v) => v !== undefined);
    return [{ range, q: q === undefined ? 1 : Number(q) || 0 }];
  });
  const sse = qualityOf(ranges, SSE_TYPE);
  return { json: qualityOf(ranges, JSON_TYPE).q > 0, sse: sse.q > 0, sseNamed: sse.q > 0 && sse.rank === 2 };
}

/** The refusal's message for a client that takes neither type. */
export function notAcceptable(accept: string | undefined): string {
  return `Accept must include ${JSON_TYPE} or ${SSE_TYPE} (the MCP spec asks for both: "${BOTH}"); this request's Accept is ${JSON.stringify(accept ?? '')}`;
}

/**
 * Lets the SDK's transport take a request whose Accept this server has already weighed. The
 * transport refuses (406) any POST whose Accept does not name both types, though this server
 * chooses the answer's type itself (`enableJsonResponse`) from what the client takes: a client
 * that takes JSON alone (curl, a plain HTTP client) was refused a JSON answer it could read. Its
 * adapter reads headers from `req.headers` and, once it copies them, from `req.rawHeaders`: both
 * are set.
 */
export function presentBoth(req: IncomingMessage): void {
  const given = req.headers.accept ?? '';
  if (given.includes(JSON_TYPE) && given.includes(SSE_TYPE)) return;
  req.headers.accept = BOTH;
  const raw = req.rawHeaders;
  for (let i = raw.length - 2; i >= 0; i -= 2) if (raw[i]!.toLowerCase() === 'accept') raw.splice(i, 2);
  raw.push('Accept', BOTH);
}
