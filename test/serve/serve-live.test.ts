/// <reference lib="dom" />
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { plainJson } from '../../host/model';
import { loadPlan, PlanRunInputSchema } from '../../host/plan';
import { containerStdout } from '../support/agent-observe';
import { planFixture } from '../support/plan-fixture';
import { cliChild, Cleanups, TICKING, waitFor } from '../support/live-step';
import { launchChromium, startServeChild, testOutputDir } from '../support/serve-browser';

const shots = testOutputDir('serve-live');

type Fixture = Awaited<ReturnType<typeof planFixture>>;
const cleanups = new Cleanups();
afterEach(() => cleanups.run(), 240_000);
const cli = (fx: Fixture, args: string[]) => cliChild(fx, args, cleanups);

async function setup(steps: Parameters<typeof planFixture>[0]) {
  const fx: Fixture = await planFixture(steps);
  cleanups.push(() => fx.cleanup());
  await fx.read(async () => undefined);
  const chrome = await launchChromium();
  cleanups.push(() => chrome.close());
  const server = await startServeChild(fx.store, fx.hostId);
  cleanups.push(() => server.stop());
  const page = await (await chrome.browser.newContext()).newPage();
  await page.goto(server.login!);
  return { fx, server, page };
}

const containerOf = (fx: Fixture, runId: string) => waitFor('the sandbox', () => fx.read(async (s) => (await s.listLeases({})).find((l) => l.runId === runId && l.releasedAt === null && l.containerId)?.containerId));

describe('live output and the run list in a real browser', { timeout: 400_000 }, () => {
  it('shows each line of a running step as it is printed, and after a SIGKILL of the host and a resume, the killed attempt\'s output as interrupted beside the new attempt', async () => {
    const { fx, server, page } = await setup([{ name: 'ticking', run: TICKING }]);
    const host = await cli(fx, ['run', fx.plan]);
    const runId = await waitFor('the run', async () => (await fx.read((s) => s.listRuns()))[0]?.id);
    await page.goto(`${server.url}/runs/${runId}`);
    await page.evaluate(() => ((window as unknown as { noReload: boolean }).noReload = true));
    // Lines arrive one by one while the step loops (it cannot end before the release file exists).
    for (const n of [2, 3, 4]) await page.waitForFunction((t) => document.querySelector('#steps pre.live')?.textContent?.includes(`tick ${t}\n`), n, { timeout: 120_000 });
    expect(await page.locator('#steps .step[data-step="ticking"] .elapsed').count()).toBeGreaterThan(0);
    expect(await page.locator('#steps .step[data-step="ticking"]').getAttribute('data-state')).not.toBe('ok');
    await page.screenshot({ path: join(shots, 'running-step.png'), fullPage: true });

    host.child.kill('SIGKILL');
    await host.ended;
    const resumed = await cli(fx, ['resume', runId]);
    await waitFor('the second attempt', () => page.evaluate(() => document.querySelectorAll('#steps pre.live').length >= 2 && (document.querySelectorAll('#steps pre.live')[1]?.textContent ?? '').includes('tick 1')));
    await containerStdout(fx.docker, await containerOf(fx, runId), ['touch', '/tmp/release']);
    expect(await resumed.ended).toBe(0);
    await page.waitForSelector('#summary [data-state="completed"]', { timeout: 120_000 });
    expect(await page.evaluate(() => (window as unknown as { noReload?: boolean }).noReload)).toBe(true);
    const cut = page.locator('#steps [data-attempt-state="interrupted"]');
    expect(await cut.count()).toBe(1);
    expect(await cut.textContent()).toContain('interrupted');
    expect(await cut.locator('pre.live').textContent()).toContain('tick 3\n');
    expect(await page.locator('#steps .step[data-step="ticking"] pre.stdout').textContent()).toContain('released');
    await page.screenshot({ path: join(shots, 'interrupted-and-resumed.png'), fullPage: true });
  });

  it('pages, filters and searches the run list by name, state and day, shows a parked run\'s reason, and adds a new run to the open list without a reload', async () => {
    const { fx, server, page } = await setup([{ name: 'one', run: 'echo one' }]);
    const loaded = await loadPlan(fx.plan);
    const input = plainJson(PlanRunInputSchema.parse({ planFile: loaded.file, plan: loaded.plan, environment: loaded.environment, envFingerprint: loaded.envFingerprint, workspaceDir: loaded.workspaceDir }));
    const add = (i: number, name: string, parked = false) =>
      fx.read((s) =>
        s.commit({
          sessionId: `ses_${i}`,
          label: 'submit',
          createSession: { meta: { plan: 'p.yaml', name } },
          runs: [{ id: `run_${String(i).padStart(3, '0')}`, kind: 'plan', submissionId: null, rootTaskId: `root_${i}`, versions: { kernel: 'berth@0.1.0', envFingerprint: 'sha256:env' } }],
          tasks: [{ id: `root_${i}`, runId: `run_${String(i).padStart(3, '0')}`, parentId: null, kind: 'plan', kindVersion: 1, phase: 'start', input }],
          runTransitions: [
            { runId: `run_${String(i).padStart(3, '0')}`, from: 'admitted', to: 'running', actor: 'test', reason: 'start' },
            ...(parked ? [{ runId: `run_${String(i).padStart(3, '0')}`, from: 'running' as const, to: 'needs_reconciliation' as const, actor: 'test', reason: 'step deploy (replay never) may have run <b>twice</b>' }] : []),
          ],
        }),
      );
    for (let i = 0; i < 60; i++) await add(i, i % 10 === 0 ? `nightly-${i}` : `build-${i}`, i === 7);
    await page.goto(`${server.url}/`);
    expect(await page.locator('#runs tbody tr').count()).toBe(50);
    expect(await page.locator('#pages').textContent()).toContain('60 runs · page 1 of 2');
    // The parked run is first: it waits for a person.
    expect(await page.locator('#runs tbody tr').first().getAttribute('data-run')).toBe('run_007');
    await page.screenshot({ path: join(shots, 'runs-list.png'), fullPage: true });
    await page.locator('#next').click();
    await page.waitForURL(/page=2/);
    expect(await page.locator('#runs tbody tr').count()).toBe(10);

    await page.goto(`${server.url}/`);
    await page.fill('#filter input[name="q"]', 'nightly');
    await page.locator('#filter button').click();
    await page.waitForURL(/q=nightly/);
    expect((await page.locator('#runs tbody tr td:first-child a').allTextContents()).sort()).toEqual(['nightly-0', 'nightly-10', 'nightly-20', 'nightly-30', 'nightly-40', 'nightly-50']);
    await page.selectOption('#filter select[name="state"]', 'needs_reconciliation');
    await page.fill('#filter input[name="q"]', '');
    await page.locator('#filter button').click();
    await page.waitForURL(/state=needs_reconciliation/);
    expect(await page.locator('#runs tbody tr').count()).toBe(1);
    await page.goto(`${server.url}/?from=2000-01-01&to=2000-01-02`);
    expect(await page.locator('#runs tbody tr').count()).toBe(0);
    const day = async (id: string) => new Date((await fx.read((s) => s.getRun(id)))!.createdAt).toISOString().slice(0, 10);
    await page.goto(`${server.url}/?from=${await day('run_001')}&to=${await day('run_019')}&q=build-1`);
    // build-1 and build-11 to build-19 (run 10 is nightly-10).
    expect(await page.locator('#runs tbody tr').count()).toBe(10);

    await page.goto(`${server.url}/runs/run_007`);
    expect(await page.locator('#park-reason').textContent()).toContain('may have run <b>twice</b>');
    expect(await page.locator('#park-reason b').count()).toBe(0);
    expect(await page.locator('#steps .step[data-state="pending"]').count()).toBe(1);
    await page.screenshot({ path: join(shots, 'parked-run.png'), fullPage: true });

    // A run committed while the list is open appears at the top, fetched as its own rows only.
    await page.goto(`${server.url}/`);
    await page.waitForFunction(() => (window as unknown as { berthLive: { state: string } }).berthLive.state === 'open');
    await page.evaluate(() => ((window as unknown as { noReload: boolean }).noReload = true));
    const before = await page.evaluate(() => (window as unknown as { berthLive: { bytes: number } }).berthLive.bytes);
    await add(99, 'fresh-run');
    await page.waitForSelector('tr[data-run="run_099"]');
    const bytes = (await page.evaluate(() => (window as unknown as { berthLive: { bytes: number } }).berthLive.bytes)) - before;
    expect(bytes).toBeLessThan(4000);
    expect(await page.evaluate(() => (window as unknown as { noReload?: boolean }).noReload)).toBe(true);
  });
});
