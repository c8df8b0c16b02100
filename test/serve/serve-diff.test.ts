/// <reference lib="dom" />
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { diffManifests } from '../../host/serve/snapshot-diff';
import { asText, lineDiff } from '../../host/serve/text-diff';
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

  it('diffs two texts by line with three lines of context, folds unchanged runs, and calls NUL bytes or invalid UTF-8 binary', () => {
    expect(lineDiff('a\nb\nc\n', 'a\nB\nc\n')).toEqual([{ op: ' ', text: 'a' }, { op: '-', text: 'b' }, { op: '+', text: 'B' }, { op: ' ', text: 'c' }]);
    expect(lineDiff('', 'x\n')).toEqual([{ op: '+', text: 'x' }]);
    const many = Array.from({ length: 20 }, (_, i) => String(i)).join('\n');
    expect(lineDiff(many, many.replace('\n10\n', '\nten\n'))).toEqual([{ op: 'gap', lines: 7 }, ...['7', '8', '9'].map((text) => ({ op: ' ', text })), { op: '-', text: '10' }, { op: '+', text: 'ten' }, ...['11', '12', '13'].map((text) => ({ op: ' ', text })), { op: 'gap', lines: 6 }]);
    expect(asText(Buffer.from('a\0b'))).toBe('binary');
    expect(asText(Buffer.from([0xc3, 0x28]))).toBe('binary');
    expect(asText(Buffer.from('héllo'))).toBe('héllo');
  });

  it('shows the files a build step added, changed and removed from the snapshots\' manifests, and a text diff of each small text file read on the host from the snapshot images (binary and oversized files said so, hostile content and names as text)', async () => {
    const fx = await planFixture([
      { name: 'first', run: "echo a > a.txt && echo b > b.txt && echo same > same.txt && seq 1 40 > long.txt && printf 'x\\0y' > bin.dat && head -c 100000 /dev/zero | tr '\\0' a > big.txt" },
      { name: 'second', run: "echo a2 > a.txt && rm b.txt && mkdir -p out && echo '</pre><script>alert(1)</script>' > 'out/<b>x.txt' && sed -i 's/^20$/twenty/' long.txt && printf 'x\\0z' > bin.dat && echo more >> big.txt" },
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
    expect(rows).toEqual([['./a.txt', 'changed'], ['./b.txt', 'removed'], ['./big.txt', 'changed'], ['./bin.dat', 'changed'], ['./long.txt', 'changed'], ['./out', 'added'], ['./out/<b>x.txt', 'added']]);
    expect(await page.locator('#diff script, #diff b').count()).toBe(0);
    // Text diffs of the small text files, read on the host from the two snapshot images.
    const text = (path: string) => page.locator(`#diff .textdiff[data-path="${path}"]`);
    const lines = (path: string) => text(path).locator('pre span').evaluateAll((ss) => ss.map((x) => [x.className, x.textContent!.replace(/\n$/, '')]));
    expect(await lines('./a.txt')).toEqual([['del', '-a'], ['add', '+a2']]);
    expect(await lines('./b.txt')).toEqual([['del', '-b']]);
    expect(await lines('./long.txt')).toEqual([['gap', '… 16 unchanged lines'], ['ctx', ' 17'], ['ctx', ' 18'], ['ctx', ' 19'], ['del', '-20'], ['add', '+twenty'], ['ctx', ' 21'], ['ctx', ' 22'], ['ctx', ' 23'], ['gap', '… 17 unchanged lines']]);
    // Hostile content and name are text: no element came of them, in the diff or anywhere on the page.
    expect(await lines('./out/<b>x.txt')).toEqual([['add', '+</pre><script>alert(1)</script>']]);
    expect(await page.locator('script:not([src])').count()).toBe(0);
    expect(await text('./bin.dat').textContent()).toContain('no text diff: binary');
    expect(await text('./big.txt').textContent()).toContain('no text diff: larger than 64 KiB');
    expect(await page.locator('#diff .textdiff[data-path="./out"]').count()).toBe(0);
    await page.screenshot({ path: join(testOutputDir('serve-live'), 'snapshot-diff.png'), fullPage: true });
    expect((await fetch(`${server.url}/runs/${runId}/diff?from=${first.id}&to=nope`, { headers: { cookie: (await page.context().cookies()).map((c) => `${c.name}=${c.value}`).join('; ') } })).status).toBe(404);
  });
});
