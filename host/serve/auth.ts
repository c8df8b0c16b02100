import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { chmodSync, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { MiddlewareHandler } from 'hono';
import { getCookie } from 'hono/cookie';
import { BerthError } from '../errors';
import { makeDirectories } from '../support/make-dirs';
import { isApiPath, refusal } from './api-errors';
import { signInAttempt, signInPage } from './sign-in';
import { hostOf } from './host-check';

/** The prefix of the cookie a login link sets (HttpOnly, SameSite=Strict); {@link sessionCookie} names it. */
export const SESSION_COOKIE = 'berth_session';

/**
 * The cookie of the server answering on `port`. A browser keeps a host's cookies apart by name and
 * path, never by port: with one name, signing in to a second `berth serve` on the machine (another
 * store, another token) replaced the first one's cookie and signed it out.
 */
export const sessionCookie = (port: string) => `${SESSION_COOKIE}_${port || 'default'}`;

/**
 * What the cookie of the server on `port` holds: a value derived from the token and the port, never
 * the token. The browser sends the cookie to every web server on the host, whatever its port; the
 * token itself is also the Bearer of /api/v1 and of `berth mcp --http` (same token file), which such
 * a server must not get. With the port in it, the cookie one `berth serve` set signs nobody in to
 * another one of the same token (a second server of the store): it was accepted there under the
 * other port's cookie name.
 */
export const sessionValue = (token: string, port = '') => createHmac('sha256', token).update(`berth-serve-session:${port || 'default'}`).digest('hex');

/**
 * The access token of `berth serve`: read from `path`, or generated on first start and written
 * with mode 0600 (`created` says so, so the caller prints the login link once). A token file
 * others can read is refused rather than trusted.
 */
export function loadOrCreateToken(path: string): { token: string; created: boolean } {
  if (existsSync(path)) {
    const mode = statSync(path).mode & 0o077;
    if (mode !== 0) throw new BerthError('serve_token_exposed', `token file ${path} is readable by others (mode ${(statSync(path).mode & 0o777).toString(8)}): chmod 600 ${path}`);
    const token = readFileSync(path, 'utf8').trim();
    if (token.length < 32) throw new BerthError('serve_token_invalid', `token file ${path} holds no usable token: remove it to generate a new one`);
    return { token, created: false };
  }
  makeDirectories(dirname(path), 'token_file_unwritable', `the token file ${path}`);
  const token = randomBytes(32).toString('hex');
  // 'wx': never overwrite a token another start wrote meanwhile.
  writeFileSync(path, `${token}\n`, { mode: 0o600, flag: 'wx' });
  chmodSync(path, 0o600);
  return { token, created: true };
}

const same = (a: string, b: string) => {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
};

/** The CSRF token of pages served with `token`: derived, so a cross-site page can neither read nor guess it. */
export const csrfToken = (secret: string) => createHmac('sha256', secret).update('berth-serve-csrf').digest('hex');

/**
 * Every request needs the token (`Authorization: Bearer`) or the cookie a sign-in set, else 401.
 * `/login` signs in (sign-in.ts). With `token` null (loopback only) nothing is asked.
 */
export function requireToken(token: string | null): MiddlewareHandler {
  return async (c, next) => {
    if (token === null) return next();
    const url = new URL(c.req.url);
    const cookie = sessionCookie(url.port);
    const session = sessionValue(token, url.port);
    if (url.pathname === '/login') {
      const given = await signInAttempt(c);
      if (given === 'form') return c.html(signInPage().value);
      if (given instanceof Response) return given;
      if (!same(given, token)) return c.html(signInPage('wrong token: paste the token berth serve printed at its first start (it is in its token file)').value, 401);
      c.header('Set-Cookie', `${cookie}=${session}; HttpOnly; SameSite=Strict; Path=/`);
      return c.redirect('/', 303);
    }
    const bearer = /^Bearer (.+)$/.exec(c.req.header('authorization') ?? '')?.[1];
    if (bearer !== undefined ? same(bearer, token) : same(getCookie(c, cookie) ?? '', session)) return next();
    if (isApiPath(c)) return refusal(c, 401, 'unauthorized', 'wrong or missing bearer token (the token is in the file berth serve names)');
    return refusal(c, 401, 'unauthorized', 'sign in with the login link berth serve printed at its first start (the token is in its token file)');
  };
}

/**
 * State changes are POST only and carry the CSRF token (form field `_csrf` or header
 * `x-csrf-token`); a request whose Origin is another site is refused even with a cookie.
 */
export function requireCsrf(secret: string): MiddlewareHandler {
  const expected = csrfToken(secret);
  return async (c, next) => {
    if (c.req.method === 'GET' || c.req.method === 'HEAD') return next();
    if (c.req.method !== 'POST') return refusal(c, 405, 'method_not_allowed', `${c.req.method}: changes are POST requests`);
    const origin = c.req.header('origin');
    if (origin && origin !== 'null' && hostOf(origin) !== c.req.header('host')) return refusal(c, 403, 'cross_site_refused', 'cross-site request refused');
    // The versioned API takes JSON only: a cross-site form cannot send it (a script would need CORS, never granted).
    if (new URL(c.req.url).pathname.startsWith('/api/v1/')) {
      if (!c.req.header('content-type')?.startsWith('application/json')) return c.json({ error: { code: 'invalid_request', message: 'API requests send application/json', retryable: false } }, 415);
      return next();
    }
    let given = c.req.header('x-csrf-token');
    if (!given) {
      const form = await c.req.parseBody().catch(() => ({}) as Record<string, unknown>);
      given = typeof form._csrf === 'string' ? form._csrf : '';
    }
    if (!same(given, expected)) return refusal(c, 403, 'csrf_refused', 'missing or wrong CSRF token (the pages send it as the form field _csrf or the header x-csrf-token)');
    return next();
  };
}
