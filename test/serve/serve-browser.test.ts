/// <reference lib="dom" />
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { planFixture } from '../support/plan-fixture';
import { launchChromium, startServeChild, testOutputDir } from '../support/serve-browser';

// berth serve as a real child process on a real store, driven by Debian's headless chromium.
type Fixture = Awaited<ReturnType<typeof planFixture>>;
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch((e) => console.error(e));
});

async function waitFor<T>(what: string, fn: () => Promise<T | undefined | false>, ms = 120_000): Promise<T> {
  for (let waited = 0; ; waited += 100) {
    const v = await fn();
    if (v) return v;
    if (waited > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function setup(steps: Parameters<typeof planFixture>[0]) {
  const fx: Fixture = await planFixture(steps);
  cleanups.push(() => fx.cleanup());
  const chrome = await launchChromium();
  cleanups.push(() => chrome.close());
  return { fx, chrome };
}

describe('berth serve in a real browser', { timeout: 300_000 }, () => {
  it('shows a running plan\'s output and its completion without a reload, renders <script> output as text, and refuses a cross-site POST without the CSRF token', async () => {
    const { fx, chrome } = await setup([
      { name: 'hello', run: "echo hello-from-step; echo '<script>alert(1)</script>'; sleep 3" },
      { name: 'last', run: 'sleep 8; echo last-step-done' },
    ]);
    // The store exists before the run (opening it creates it): the runs page is open when the run starts.
    await fx.read(async () => undefined);
    const server = await startServeChild(fx.store, fx.hostId);
    cleanups.push(() => server.stop());
    expect(server.login).toMatch(/\/login\?token=[0-9a-f]{64}$/);
    const context = await chrome.browser.newContext();
    const runsPage = await context.newPage();
    let dialogs = 0;
    runsPage.on('dialog', (d) => {
      dialogs++;
      void d.dismiss();
    });
    await runsPage.goto(server.login!);
    await runsPage.waitForFunction(() => (window as unknown as { berthLive: { state: string } }).berthLive.state === 'open');
    await runsPage.evaluate(() => ((window as unknown as { noReload: boolean }).noReload = true));

    const running = fx.cli(['run', fx.plan]);
    const runId = await waitFor('the run', async () => (await fx.read((s) => s.listRuns()))[0]?.id);
    // The new run shows up on the open runs page by itself.
    await runsPage.waitForSelector(`tr[data-run="${runId}"]`, { timeout: 120_000 });
    const page = await context.newPage();
    page.on('dialog', (d) => {
      dialogs++;
      void d.dismiss();
    });
    await page.goto(`${server.url}/runs/${runId}`);
    // A marker that a reload would wipe.
    await page.evaluate(() => ((window as unknown as { noReload: boolean }).noReload = true));
    expect(await page.locator('#summary [data-state]').textContent()).not.toBe('completed');

    // A page of another origin posts to the run's cancel without the CSRF token: refused.
    const evil: Server = createServer((_req, res) => {
      res.setHeader('content-type', 'text/html');
      res.end(`<form id="f" method="post" action="${server.url}/runs/${runId}/cancel"></form><script>document.getElementById('f').submit()</script>`);
    });
    await new Promise<void>((r) => evil.listen(0, '127.0.0.1', () => r()));
    cleanups.push(() => new Promise((r) => evil.close(() => r())));
    const evilPage = await context.newPage();
    const [answer] = await Promise.all([evilPage.waitForResponse((r) => r.url().endsWith('/cancel')), evilPage.goto(`http://127.0.0.1:${(evil.address() as { port: number }).port}/`)]);
    expect(answer.status()).toBe(403);

    await page.waitForSelector('#summary [data-state="completed"]', { timeout: 180_000 });
    await page.waitForFunction(() => document.querySelector('#steps')?.textContent?.includes('last-step-done'));
    expect(await page.evaluate(() => (window as unknown as { noReload?: boolean }).noReload)).toBe(true);
    expect(await page.locator('#steps').textContent()).toContain('hello-from-step');
    // The step's <script> is text on the page, not an element, and no dialog fired.
    expect(await page.locator('#steps pre.stdout').first().textContent()).toContain('<script>alert(1)</script>');
    expect(await page.locator('#steps script').count()).toBe(0);
    expect(dialogs).toBe(0);
    await runsPage.waitForSelector(`tr[data-run="${runId}"] [data-state="completed"]`);
    expect(await runsPage.evaluate(() => (window as unknown as { noReload?: boolean }).noReload)).toBe(true);
    await page.screenshot({ path: join(testOutputDir('serve-browser'), 'run-page-completed.png'), fullPage: true });
    expect((await running).code).toBe(0);
    expect(await fx.read(async (s) => (await s.getRun(runId))!.state)).toBe('completed');
  });

  it('answers 401 without the token, and 403 to a POST with the cookie but no CSRF token', async () => {
    const { fx } = await setup([{ name: 'one', run: 'true' }]);
    expect((await fx.cli(['run', fx.plan])).code).toBe(0);
    const server = await startServeChild(fx.store, fx.hostId);
    cleanups.push(() => server.stop());
    for (const path of ['/', '/api/runs', '/api/events', '/assets/live.js']) expect((await fetch(server.url + path)).status, path).toBe(401);
    expect((await fetch(`${server.url}/login?token=${'0'.repeat(64)}`, { redirect: 'manual' })).status).toBe(401);
    const login = await fetch(server.login!, { redirect: 'manual' });
    expect(login.status).toBe(303);
    const cookie = login.headers.get('set-cookie')!.split(';')[0]!;
    expect(login.headers.get('set-cookie')).toMatch(/HttpOnly; SameSite=Strict/);
    expect((await fetch(server.url + '/api/runs', { headers: { cookie } })).status).toBe(200);
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const post = await fetch(`${server.url}/runs/${runId}/cancel`, { method: 'POST', headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' }, body: '' });
    expect(post.status).toBe(403);
    // The token file is the owner's only; a second start prints no login link.
    const { statSync } = await import('node:fs');
    expect(statSync(join(fx.dir, 'serve-token')).mode & 0o777).toBe(0o600);
    await server.stop();
    const again = await startServeChild(fx.store, fx.hostId);
    cleanups.push(() => again.stop());
    expect(again.login).toBeNull();
  });

  it('refuses to bind a non-loopback address without a token', async () => {
    const { fx } = await setup([{ name: 'one', run: 'true' }]);
    expect((await fx.cli(['run', fx.plan])).code).toBe(0);
    const r = await fx.cli(['serve', '--host', '0.0.0.0', '--no-token', '--port', '0']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('serve_needs_token');
  });
});
