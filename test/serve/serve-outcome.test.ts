/// <reference lib="dom" />
import { createHash } from 'node:crypto';
import { appendFileSync, chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { planFixture } from '../support/plan-fixture';
import { launchChromium, startServeChild } from '../support/serve-browser';

// Acceptance, lineage/forks and artifacts on `berth serve` (a child process), clicked in Debian's
// headless chromium, on a real store and engine.
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch((e) => console.error(e));
});

async function browserPage(login: string) {
  const chrome = await launchChromium();
  cleanups.push(() => chrome.close());
  const page = await chrome.browser.newPage({ acceptDownloads: true });
  await page.goto(login);
  return page;
}

describe('outcomes of runs on the page', { timeout: 400_000 }, () => {
  it('shows `acceptance: accepted` with the command\'s evidence for a plan with an acceptance command, and accepts a manual one by a click with the operator as actor', async () => {
    const fx = await planFixture([{ name: 'build', run: 'echo built > built.txt' }]);
    cleanups.push(() => fx.cleanup());
    const manual = await fx.cli(['run', fx.plan]);
    expect(manual.code, manual.stderr).toBe(0);
    appendFileSync(fx.plan, 'acceptance: { command: "grep -q built built.txt && echo checked" }\n');
    const judged = await fx.cli(['run', fx.plan]);
    expect(judged.code, judged.stderr).toBe(0);
    const runs = await fx.read((s) => s.listRuns());
    const manualRun = runs.find((r) => r.createdAt === Math.min(...runs.map((x) => x.createdAt)))!;
    const commandRun = runs.find((r) => r.id !== manualRun.id)!;

    const server = await startServeChild(fx.store, fx.hostId);
    cleanups.push(() => server.stop());
    const page = await browserPage(server.login!);
    await page.goto(server.url + '/');
    expect(await page.locator(`tr[data-run="${commandRun.id}"] td.acceptance`).textContent()).toBe('accepted');
    expect(await page.locator(`tr[data-run="${manualRun.id}"] td.acceptance`).textContent()).toBe('pending');
    expect(await page.locator(`tr[data-run="${commandRun.id}"] td.cost`).textContent()).toMatch(/CPU-s · lease \d+ s/);

    await page.goto(`${server.url}/runs/${commandRun.id}`);
    const state = (await page.locator('#acceptance-state').textContent())!;
    expect(state).toContain('acceptance: accepted');
    const evidence = JSON.parse((await page.locator('#acceptance .evidence').textContent())!) as { exitCode: number; outputDigest: string };
    expect(evidence.exitCode).toBe(0);
    expect(evidence.outputDigest).toMatch(/^sha256:[0-9a-f]{64}$/);
    // The cost section: CPU measured over the steps' execs, lease time, snapshot bytes.
    expect(await page.locator('#cost tr[data-cost="sandbox CPU"] td').textContent()).toMatch(/over [1-9]\d* exec/);
    expect(await page.locator('#cost tr[data-cost="snapshots stored"] td').textContent()).toMatch(/^[1-9]\d* bytes/);
    expect(await page.locator('#actions button:has-text("Accept")').count()).toBe(1);

    await page.goto(`${server.url}/runs/${manualRun.id}`);
    expect(await page.locator('#acceptance-state').textContent()).toContain('acceptance: pending');
    await page.locator('#actions button:has-text("Accept")').click();
    await page.waitForSelector('#said');
    expect(await page.locator('#said').textContent()).toContain(`accepted run ${manualRun.id} as user:web-tester`);
    expect(await page.locator('#acceptance-state').textContent()).toContain('acceptance: accepted by user:web-tester');
    const stored = await fx.read((s) => s.listAcceptance({ runId: manualRun.id }));
    expect(stored.map((d) => [d.decision, d.actor])).toEqual([['accepted', 'user:web-tester']]);
    const list = (await (await page.request.get(`${server.url}/api/runs`)).json()) as { runs: Array<{ run: { id: string }; acceptance: { state: string }; cost: { cpuSeconds: number } }> };
    expect(list.runs.find((r) => r.run.id === commandRun.id)).toMatchObject({ acceptance: { state: 'accepted' } });
    expect(list.runs.every((r) => typeof r.cost.cpuSeconds === 'number')).toBe(true);
    // Reject needs a reason (as berth reject does); the reason is shown as text.
    await page.locator('#actions form:has(button:has-text("Reject")) input[name="reason"]').fill('<script>alert(1)</script> wrong output');
    await page.locator('#actions button:has-text("Reject")').click();
    await page.waitForFunction(() => document.querySelector('#acceptance-state')?.textContent?.includes('rejected'));
    expect(await page.locator('#acceptance-state').textContent()).toContain('acceptance: rejected by user:web-tester');
    expect(await page.locator('#acceptance-state').textContent()).toContain('(<script>alert(1)</script> wrong output) · 2 decisions');
    expect(await page.locator('#acceptance script').count()).toBe(0);
    // The JSON API mirrors the page.
    const api = (await (await page.request.get(`${server.url}/api/runs/${manualRun.id}`)).json()) as { acceptance: { state: string; actor: string }; cost: { leaseSeconds: number } };
    expect(api.acceptance).toMatchObject({ state: 'rejected', actor: 'user:web-tester' });
    expect(typeof api.cost.leaseSeconds).toBe('number');
  });

  it('forks a finished plan from a checkpoint by "fork from here": the fork runs the remaining steps and completes, and the original lists it as a fork', async () => {
    const fx = await planFixture([
      { name: 'one', run: 'echo one >> steps.log' },
      { name: 'two', run: 'echo two >> steps.log' },
      { name: 'three', run: 'cat steps.log' },
    ]);
    cleanups.push(() => fx.cleanup());
    const first = await fx.cli(['run', fx.plan]);
    expect(first.code, first.stderr).toBe(0);
    const original = (await fx.read((s) => s.listRuns()))[0]!;
    const after = (await fx.read((s) => s.listSnapshots({ runId: original.id }))).find((s) => s.checkpoint === 'step:0:one')!;

    const server = await startServeChild(fx.store, fx.hostId);
    cleanups.push(() => server.stop());
    const page = await browserPage(server.login!);
    await page.goto(`${server.url}/runs/${original.id}`);
    expect(await page.locator('#lineage').textContent()).toContain('an original run with no forks');
    await page.locator(`#snapshots tr[data-snapshot="${after.id}"] button:has-text("fork from here")`).click();
    await page.waitForSelector('#said-link', { timeout: 120_000 });
    expect(await page.locator('#said').textContent()).toContain(`from ${original.id} at step:0:one`);
    const href = (await page.locator('#said-link').getAttribute('href'))!;
    const forkId = href.replace('/runs/', '');
    await page.locator('#said-link').click();
    await page.waitForSelector('#summary [data-state="completed"]', { timeout: 240_000 });
    expect(await page.locator('#forked-from').textContent()).toContain(`forked from ${original.id} at step:0:one`);
    await page.waitForFunction(() => document.querySelector('#steps')?.textContent?.includes('three'));
    const steps = await page.locator('#steps .step strong').allTextContents();
    expect(steps).toEqual(['two', 'three']);
    expect(await page.locator('#steps .step[data-step="three"] pre.stdout').textContent()).toBe('one\ntwo\n');
    const forkRun = (await fx.read((s) => s.getRun(forkId)))!;
    expect(forkRun.state).toBe('completed');
    const transitions = await fx.read((s) => s.listRunTransitions(forkId));
    expect(transitions[0]!.actor).toBe('user:web-tester');

    await page.goto(`${server.url}/runs/${original.id}`);
    expect(await page.locator(`#forks li[data-fork="${forkId}"]`).textContent()).toContain('completed');
    const api = (await (await page.request.get(`${server.url}/api/runs/${original.id}`)).json()) as { forks: Array<{ runId: string }> };
    expect(api.forks.map((f) => f.runId)).toEqual([forkId]);
  });

  it('downloads an artifact whose bytes hash to the sha256 the page shows and the store committed', async () => {
    const fx = await planFixture([{ name: 'report', run: 'mkdir -p out && seq 1 20000 > out/report.txt', artifacts: ['out/report.txt'] }]);
    cleanups.push(() => fx.cleanup());
    const done = await fx.cli(['run', fx.plan]);
    expect(done.code, done.stderr).toBe(0);
    const run = (await fx.read((s) => s.listRuns()))[0]!;
    const [committed] = await fx.read((s) => s.listArtifacts(run.id));

    const server = await startServeChild(fx.store, fx.hostId);
    cleanups.push(() => server.stop());
    const page = await browserPage(server.login!);
    await page.goto(`${server.url}/runs/${run.id}`);
    const row = page.locator('#artifacts tr[data-artifact="out/report.txt"]');
    const shown = (await row.locator('code.sha256').textContent())!;
    expect(shown).toBe(committed!.sha256);
    const [download] = await Promise.all([page.waitForEvent('download'), row.locator('a.download').click()]);
    expect(await download.failure()).toBeNull();
    const bytes = readFileSync((await download.path())!);
    const expected = Array.from({ length: 20000 }, (_, i) => `${i + 1}\n`).join('');
    expect(bytes.toString()).toBe(expected);
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(shown.replace(/^sha256:/, ''));
    expect(download.suggestedFilename()).toBe('report.txt');

    // A blob changed in the artifact store is refused, not served as the artifact.
    const blob = join(dirname(fx.store), 'artifacts', 'sha256', committed!.sha256.replace(/^sha256:/, ''));
    chmodSync(blob, 0o644);
    writeFileSync(blob, expected.replace('777', '778'));
    const refused = await page.request.get(`${server.url}${(await row.locator('a.download').getAttribute('href'))!}`);
    expect(refused.status()).toBe(409);
    expect(await refused.text()).toContain('artifact_altered: out/report.txt');
  });

  it('records one decision when Accept is double-clicked or POSTed twice at once (form or API): the second answer is 409 already_decided and the page shows the decision', async () => {
    const fx = await planFixture([{ name: 'build', run: 'echo built' }]);
    cleanups.push(() => fx.cleanup());
    for (let i = 0; i < 3; i++) expect((await fx.cli(['run', fx.plan])).code).toBe(0);
    const [clicked, posted, api] = (await fx.read((s) => s.listRuns())).map((r) => r.id).sort();
    const server = await startServeChild(fx.store, fx.hostId);
    cleanups.push(() => server.stop());
    const page = await browserPage(server.login!);
    const decisions = (runId: string) => fx.read((s) => s.listAcceptance({ runId }));

    await page.goto(`${server.url}/runs/${clicked}`);
    // A person's double click: two presses some tens of ms apart (playwright's dblclick sends both
    // in one go, which chromium folds into one submission before its request leaves).
    const box = (await page.locator('#actions button:has-text("Accept")').boundingBox())!;
    await page.mouse.click(box.x + box.width / 2, box.y + box.height / 2, { clickCount: 1 });
    await new Promise((r) => setTimeout(r, 60));
    await page.mouse.click(box.x + box.width / 2, box.y + box.height / 2, { clickCount: 2 }).catch(() => {});
    await page.waitForSelector('#said');
    await page.waitForLoadState('load');
    expect((await decisions(clicked!)).map((d) => [d.decision, d.actor])).toEqual([['accepted', 'user:web-tester']]);
    expect(await page.locator('#acceptance-state').textContent()).toContain('acceptance: accepted by user:web-tester');
    expect(await page.locator('#acceptance-state').textContent()).not.toContain('decisions');

    // Two POSTs in flight at once, as two tabs or a retrying client send them.
    const auth = { authorization: `Bearer ${/token=([0-9a-f]+)/.exec(server.login!)![1]}` };
    const csrf = /name="_csrf" value="([0-9a-f]{64})"/.exec(await (await fetch(`${server.url}/runs/${posted}`, { headers: auth })).text())![1]!;
    const form = () => fetch(`${server.url}/runs/${posted}/accept`, { method: 'POST', headers: { ...auth, accept: 'application/json', 'x-csrf-token': csrf, 'content-type': 'application/x-www-form-urlencoded' }, body: '' });
    const both = await Promise.all([form(), form()]);
    expect(both.map((r) => r.status).sort()).toEqual([200, 409]);
    const refused = (await both.find((r) => r.status === 409)!.json()) as { said: string };
    expect(refused.said).toMatch(new RegExp(`^already_decided: run ${posted} is already accepted by user:web-tester at `));
    expect(await decisions(posted!)).toHaveLength(1);

    const v1 = () => fetch(`${server.url}/api/v1/runs/${api}/accept`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{}' });
    const twice = await Promise.all([v1(), v1()]);
    expect(twice.map((r) => r.status).sort()).toEqual([200, 409]);
    expect(await twice.find((r) => r.status === 409)!.json()).toMatchObject({ error: { code: 'already_decided', retryable: false, ids: { runId: api } } });
    expect(await decisions(api!)).toHaveLength(1);
    // A decision that changes the acceptance is still taken: rejecting after the accept.
    await page.goto(`${server.url}/runs/${clicked}`);
    await page.locator('#actions form:has(button:has-text("Reject")) input[name="reason"]').fill('changed my mind');
    await page.locator('#actions button:has-text("Reject")').click();
    await page.waitForFunction(() => document.querySelector('#acceptance-state')?.textContent?.includes('rejected'));
    expect((await decisions(clicked!)).map((d) => d.decision)).toEqual(['accepted', 'rejected']);
  });
});
