/// <reference lib="dom" />
import { afterEach, describe, expect, it } from 'vitest';
import { planFixture } from '../support/plan-fixture';
import { launchChromium, startServeChild } from '../support/serve-browser';

// The event stream across a real cut: the serve process is SIGKILLed mid-run and started again
// on the same port; the browser's EventSource reconnects by itself with Last-Event-ID.
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch((e) => console.error(e));
});

type Live = { events: number[]; state: string; opens?: number };

describe('the run page\'s event stream', { timeout: 300_000 }, () => {
  it('after its connection is cut mid-run and comes back, the runs page has received every commit once, in order, as the commit log has them', async () => {
    const fx = await planFixture([
      { name: 'a', run: 'sleep 2; echo a' },
      { name: 'b', run: 'sleep 2; echo b' },
      { name: 'c', run: 'sleep 2; echo c' },
      { name: 'd', run: 'sleep 1; echo d' },
    ]);
    cleanups.push(() => fx.cleanup());
    // The store exists before the run (opening it creates it), so the page is open from the start.
    await fx.read(async () => undefined);
    let server = await startServeChild(fx.store, fx.hostId);
    cleanups.push(() => server.stop());
    const port = new URL(server.url).port;
    const chrome = await launchChromium();
    cleanups.push(() => chrome.close());
    const page = await chrome.browser.newPage();
    await page.goto(server.login!);
    await page.waitForSelector('main[data-live="/api/events"]');
    await page.waitForFunction(() => (window as unknown as { berthLive: Live }).berthLive.state === 'open');
    const after = Number(await page.locator('main').getAttribute('data-after'));
    const running = fx.cli(['run', fx.plan]);
    await page.waitForFunction(() => (window as unknown as { berthLive: Live }).berthLive.events.length > 0, undefined, { timeout: 120_000 });

    // The cut: the server dies with the stream open; commits land while nobody listens.
    server.child.kill('SIGKILL');
    await server.stop();
    const before = await page.evaluate(() => (window as unknown as { berthLive: Live }).berthLive.events.length);
    await fx.read(async (s) => {
      const seq = await s.lastCommitLogSeq();
      for (let i = 0; i < 600 && (await s.lastCommitLogSeq()) === seq; i++) await new Promise((r) => setTimeout(r, 50));
    });
    server = await startServeChild(fx.store, fx.hostId, ['--port', port]);
    cleanups.push(() => server.stop());

    expect((await running).code).toBe(0);
    const log = await fx.read(async (s) => (await s.listCommitLog({ afterSeq: after })).map((c) => c.seq));
    await page.waitForFunction((last) => (window as unknown as { berthLive: Live }).berthLive.events.includes(last), log[log.length - 1]!, { timeout: 120_000 });
    const live = await page.evaluate(() => (window as unknown as { berthLive: Live }).berthLive);
    expect(live.opens).toBeGreaterThanOrEqual(2);
    expect(before).toBeLessThan(log.length);
    expect(live.events).toEqual(log);
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    await page.waitForSelector(`tr[data-run="${runId}"] [data-state="completed"]`);
  });

  it('a client reconnecting with Last-Event-ID N gets exactly the commits after N', async () => {
    const fx = await planFixture([{ name: 'one', run: 'echo one' }]);
    cleanups.push(() => fx.cleanup());
    expect((await fx.cli(['run', fx.plan])).code).toBe(0);
    const server = await startServeChild(fx.store, fx.hostId);
    cleanups.push(() => server.stop());
    const cookie = (await fetch(server.login!, { redirect: 'manual' })).headers.get('set-cookie')!.split(';')[0]!;
    const all = await fx.read((s) => s.listCommitLog());
    const from = all[Math.floor(all.length / 2)]!.seq;
    const ctl = new AbortController();
    const res = await fetch(`${server.url}/api/events?after=1`, { headers: { cookie, 'last-event-id': String(from) }, signal: ctl.signal });
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const reader = res.body!.getReader();
    let text = '';
    const want = all.filter((c) => c.seq > from).map((c) => c.seq);
    while (!want.every((s) => text.includes(`id: ${s}\n`))) text += new TextDecoder().decode((await reader.read()).value);
    ctl.abort();
    const ids = [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    expect(ids).toEqual(want);
  });
});
