/// <reference lib="dom" />
import { request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { planFixture } from '../support/plan-fixture';
import { launchChromium, startServeChild } from '../support/serve-browser';

// DNS rebinding: a page on evil.example whose name later resolves to 127.0.0.1 sends `Host: evil.example`.
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch((e) => console.error(e));
});

/** One real HTTP request to the server with a Host header of our choosing (fetch forbids setting it). */
function send(url: string, o: { host: string; method?: string; headers?: Record<string, string>; body?: string }): Promise<{ status: number; body: string }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({ hostname: u.hostname, port: u.port, path: u.pathname + u.search, method: o.method ?? 'GET', headers: { ...o.headers, host: o.host } }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('error', reject);
    req.end(o.body);
  });
}

async function completedRun() {
  const fx = await planFixture([{ name: 'one', run: 'echo one' }]);
  cleanups.push(() => fx.cleanup());
  expect((await fx.cli(['run', fx.plan])).code).toBe(0);
  return { fx, runId: await fx.read(async (s) => (await s.listRuns())[0]!.id) };
}

const csrfOf = (page: string) => /name="_csrf" value="([0-9a-f]{64})"/.exec(page)?.[1];

describe('berth serve accepts only its own address as Host', { timeout: 300_000 }, () => {
  it('with --no-token, a request naming another Host gets neither the run page nor its CSRF token, and an accept POSTed with that token is refused', async () => {
    const { fx, runId } = await completedRun();
    const server = await startServeChild(fx.store, fx.hostId, ['--no-token']);
    cleanups.push(() => server.stop());
    const port = new URL(server.url).port;
    const page = `${server.url}/runs/${runId}`;

    const evil = await send(page, { host: `evil.example:${port}` });
    expect(evil.status).toBe(421);
    expect(evil.body).toMatch(/Host/);
    expect(csrfOf(evil.body)).toBeUndefined();
    // The token from a page served to the right Host does not help a request with the wrong one.
    const own = await send(page, { host: `127.0.0.1:${port}` });
    expect(own.status).toBe(200);
    const csrf = csrfOf(own.body)!;
    expect(csrf).toBeDefined();
    const post = await send(`${page}/accept`, { host: 'evil.example', method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: `_csrf=${csrf}` });
    expect(post.status).toBe(421);
    expect(await fx.read((s) => s.listAcceptance({ runId }))).toEqual([]);

    // localhost, 127.0.0.1 and [::1] with the port are this server; without the port, or another port, they are not.
    for (const host of [`localhost:${port}`, `LOCALHOST:${port}`, `[::1]:${port}`]) expect((await send(`${server.url}/api/runs`, { host })).status, host).toBe(200);
    for (const host of ['localhost', `127.0.0.1:${Number(port) + 1}`, `127.0.0.1.evil.example:${port}`, `evil.example:${port}`]) {
      expect((await send(`${server.url}/api/runs`, { host })).status, host).toBe(421);
    }
  });

  it('with a token, a request carrying the token but another Host is refused too', async () => {
    const { fx } = await completedRun();
    const server = await startServeChild(fx.store, fx.hostId);
    cleanups.push(() => server.stop());
    const token = /token=([0-9a-f]+)/.exec(server.login!)![1]!;
    const port = new URL(server.url).port;
    const auth = { authorization: `Bearer ${token}` };
    expect((await send(`${server.url}/api/runs`, { host: `127.0.0.1:${port}`, headers: auth })).status).toBe(200);
    const evil = await send(`${server.url}/api/runs`, { host: `evil.example:${port}`, headers: auth });
    expect(evil.status).toBe(421);
    expect(evil.body).not.toContain('"runs"');
    expect((await send(server.login!, { host: `evil.example:${port}` })).status).toBe(421);
  });

  it('a browser that opens the run page under a rebound name (evil.example resolving to 127.0.0.1) is shown the refusal, no page and no CSRF token', async () => {
    const { fx, runId } = await completedRun();
    const server = await startServeChild(fx.store, fx.hostId, ['--no-token']);
    cleanups.push(() => server.stop());
    const chrome = await launchChromium(['--host-resolver-rules=MAP evil.example 127.0.0.1']);
    cleanups.push(() => chrome.close());
    const page = await chrome.browser.newPage();
    const port = new URL(server.url).port;
    const res = await page.goto(`http://evil.example:${port}/runs/${runId}`);
    expect(res!.status()).toBe(421);
    expect(await page.content()).not.toContain('_csrf');
    const ok = await page.goto(`http://localhost:${port}/runs/${runId}`);
    expect(ok!.status()).toBe(200);
    expect(await page.content()).toContain('_csrf');
  });
});
