import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { BerthError, ErrorIds } from '../errors';

/**
 * Everything under `/api/` is read by programs, which branch on a code, not on prose: every answer
 * there that is not a success is `{ error: { code, message, retryable, ids } }`, whichever layer
 * refused it (Host, token, CSRF, body limit, route, handler). Pages keep their plain text.
 */
export const isApiPath = (c: Context) => new URL(c.req.url).pathname.startsWith('/api/');

/** The HTTP status of a BerthError: missing things 404, a malformed request 400, else a conflict with the state. */
export const statusOf = (err: BerthError): ContentfulStatusCode => (err.code.endsWith('not_found') ? 404 : err.code === 'usage' || err.code === 'invalid_request' ? 400 : 409);

/** A BerthError as the API answers it: status by kind, body `{ error: { code, message, retryable, ids } }`. */
export const apiError = (c: Context, err: BerthError, status = statusOf(err)) => c.json({ error: { code: err.code, message: err.message, retryable: err.retryable, ids: err.ids } }, status);

/** A refusal the server makes itself: JSON with `code` under /api, `STATUS: message` as text elsewhere. */
export function refusal(c: Context, status: ContentfulStatusCode, code: string, message: string, ids: ErrorIds = {}) {
  if (isApiPath(c)) return c.json({ error: { code, message, retryable: false, ids } }, status);
  return c.text(`${status}: ${message}`, status);
}
