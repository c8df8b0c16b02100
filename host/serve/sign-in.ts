import type { Context } from 'hono';
import { html, type SafeHtml } from './html';
import { refusal } from './api-errors';
import { hostOf } from './host-check';

/**
 * The sign-in page: a form that POSTs the token. Its body is the only place the token travels: a
 * link holding it (`/login?token=`, which berth serve printed) stayed in the browser's history
 * database and its address-bar suggestions after the redirect, and so would a page replacing its
 * own history entry or a token in the fragment (Chromium keeps the URL it committed). Standalone:
 * the page's style and script are behind the token.
 */
export function signInPage(said?: string): SafeHtml {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>sign in · berth</title></head>
<body><main><h1>berth</h1>${said ? html`<p id="said">${said}</p>` : ''}<form id="sign-in" method="post" action="/login"><label>token <input type="password" name="token" autocomplete="off" required autofocus></label> <button type="submit">sign in</button></form>
<p>The token is the one berth serve printed at its first start; it is kept in its token file (<code>serve-token</code> beside the store, or <code>--token-file</code>).</p></main></body></html>`;
}

/**
 * What a request to `/login` gives: `form` (show the sign-in page), the token it carries (the form's
 * POST, or `?token=` that scripts and older printed links use), or a refusal: a POST from another
 * origin (a page elsewhere signing the browser in), or a method other than GET or POST.
 */
export async function signInAttempt(c: Context): Promise<string | 'form' | Response> {
  if (c.req.method === 'GET' || c.req.method === 'HEAD') return c.req.query('token') ?? 'form';
  if (c.req.method !== 'POST') return refusal(c, 405, 'method_not_allowed', `${c.req.method}: sign in with a POST of the form`);
  const origin = c.req.header('origin');
  if (origin && origin !== 'null' && hostOf(origin) !== c.req.header('host')) return refusal(c, 403, 'cross_site_refused', 'cross-site request refused');
  const form = await c.req.parseBody().catch(() => ({}) as Record<string, unknown>);
  return typeof form.token === 'string' ? form.token.trim() : '';
}
