/// <reference lib="dom" />
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { diffManifests } from '../../host/serve/snapshot-diff';
import { planFixture } from '../support/plan-fixture';
import { launchChromium, startServeChild, testOutputDir } from '../support/serve-browser';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch((e) => console.error(e));
}, 240_000);

describe('workspace diff between two snapshots of a run', { timeout: 300_000 }, () => {
  it('tells added, changed and removed paths apart from two manifests, and leaves equal ones out', () => {
    const d = diffManifests({ './a': 'f:644:1', './b': 'f:644:2', './d': 'd:755' }, { './a': 'f:644:9', './d': 'd:755', './e': 'l:a' });
    expect(d.map((c) => [c.path, c.change])).toEqual([['./a', 'changed'], ['./b', 'removed'], ['./e', 'added']]);
  });

  it('shows the files a build step added, changed and removed, computed on the host from the snapshots\' manifests', async () => {
    const fx = await planFixture([
      { name: 'first', run: 'echo a > a.txt && echo b > b.txt && echo same > same.txt' },
      { name: 'second', run: 'echo a2 > a.txt && rm b.txt && mkdir -p out && echo "<script>alert(1)</script>" > "out/<b>x.txt"' },
    ]);
    cleanups.push(() => fx.cleanup());
    const end = await fx.cli(['run', fx.plan]);
    expect(end.code, end.stderr).toBe(0);
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const snaps = await fx.read((s) => s.listSnapshots({ runId }));
    const first = snaps.find((s) => s.checkpoint.startsWith('step:0'))!;
    const second = snaps.find((s) => s.checkpoint.startsWith('step:1'))!;
    const server = await startServeChild(fx.store, fx.hostId);
    cleanups.push(() => server.stop());
    const chrome = await launchChromium();
    cleanups.push(() => chrome.close());
    const page = await (await chrome.browser.newContext()).newPage();
    await page.goto(server.login!);
    await page.goto(`${server.url}/runs/${runId}`);
    await page.selectOption('#diff-form select[name="from"]', first.id);
    await page.selectOption('#diff-form select[name="to"]', second.id);
    await page.locator('#diff-form button').click();
    await page.waitForSelector('#diff');
    const rows = await page.locator('#diff tbody tr').evaluateAll((trs) => trs.map((tr) => [(tr as HTMLElement).dataset.path, (tr as HTMLElement).dataset.change]));
    expect(rows).toEqual([['./a.txt', 'changed'], ['./b.txt', 'removed'], ['./out', 'added'], ['./out/<b>x.txt', 'added']]);
    expect(await page.locator('#diff script, #diff b').count()).toBe(0);
    await page.screenshot({ path: join(testOutputDir('serve-live'), 'snapshot-diff.png'), fullPage: true });
    expect((await fetch(`${server.url}/runs/${runId}/diff?from=${first.id}&to=nope`, { headers: { cookie: (await page.context().cookies()).map((c) => `${c.name}=${c.value}`).join('; ') } })).status).toBe(404);
  });
});
