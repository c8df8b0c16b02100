import { describe, expect, it } from 'vitest';
import { Hono } from 'hono';
import { csrfToken, escapeHtml, html, isLoopback } from '../../host/serve';
import { requireCsrf, requireToken } from '../../host/serve/auth';

describe('serve: HTML escaping and access checks', () => {
  it('escapes every interpolated value, in text and attributes, arrays included; only html`` output passes as markup', () => {
    const evil = `<script>alert(1)</script>" onmouseover="x' \``;
    const out = html`<p title="${evil}">${evil}${[evil, html`<b>ok</b>`]}</p>`.value;
    expect(out).not.toContain('<script>');
    expect(out).not.toContain('" onmouseover');
    expect(out).toContain('&lt;script&gt;alert(1)&lt;/script&gt;&quot; onmouseover=&quot;x&#39; &#96;');
    expect(out).toContain('<b>ok</b>');
    expect(escapeHtml('&amp;')).toBe('&amp;amp;');
  });

  it('tells loopback addresses from others', () => {
    for (const h of ['127.0.0.1', '127.1.2.3', '::1', 'localhost']) expect(isLoopback(h), h).toBe(true);
    for (const h of ['0.0.0.0', '10.0.0.1', '::', '192.168.1.2', 'example.com']) expect(isLoopback(h), h).toBe(false);
  });

  it('asks for the token on every request and the CSRF token on every POST; refuses another origin and other methods', async () => {
    const token = 'a'.repeat(64);
    const app = new Hono();
    app.use('*', requireToken(token));
    app.use('*', requireCsrf(token));
    app.get('/x', (c) => c.text('read'));
    app.post('/x', (c) => c.text('changed'));
    app.delete('/x', (c) => c.text('deleted'));
    const auth = { authorization: `Bearer ${token}`, host: 'localhost' };
    expect((await app.request('/x')).status).toBe(401);
    expect((await app.request('/x', { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    expect((await app.request('/x', { headers: auth })).status).toBe(200);
    expect((await app.request('/x', { headers: { cookie: `berth_session=${token}` } })).status).toBe(200);
    expect((await app.request('/x', { method: 'POST', headers: auth })).status).toBe(403);
    expect((await app.request('/x', { method: 'POST', headers: { ...auth, 'x-csrf-token': 'nope' } })).status).toBe(403);
    expect((await app.request('/x', { method: 'POST', headers: { ...auth, 'x-csrf-token': csrfToken(token), origin: 'http://evil.example' } })).status).toBe(403);
    expect((await app.request('/x', { method: 'DELETE', headers: { ...auth, 'x-csrf-token': csrfToken(token) } })).status).toBe(405);
    const ok = await app.request('/x', { method: 'POST', headers: { ...auth, 'x-csrf-token': csrfToken(token), origin: 'http://localhost' } });
    expect(await ok.text()).toBe('changed');
    const form = await app.request('/x', { method: 'POST', headers: { ...auth, 'content-type': 'application/x-www-form-urlencoded' }, body: `_csrf=${csrfToken(token)}` });
    expect(await form.text()).toBe('changed');
  });
});
