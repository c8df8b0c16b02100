/// <reference lib="dom" />
import { afterEach, describe, expect, it } from 'vitest';
import { planFixture } from '../support/plan-fixture';
import { launchChromium, startServeChild } from '../support/serve-browser';

// The reconcile choices of `berth reconcile` on the page (Debian's headless chromium against a
// `berth serve` child, on a real store and engine), and its refusals in the page's words.
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch((e) => console.error(e));
}, 120_000);

describe('reconcile choices on the page', { timeout: 300_000 }, () => {
  it('offers accept, reject, verify and fail for a run with an uncertain effect; refuses verify in words a web user can act on; fails the run with the answer given beside the button (happened, did not, or not known)', async () => {
    const fx = await planFixture([{ name: 'long', run: 'echo started; sleep 120', replay: 'never' }]);
    cleanups.push(() => fx.cleanup());
    const running = fx.cli(['run', fx.plan]);
    let runId: string | undefined;
    for (let i = 0; i < 1200 && !runId; i++) {
      const run = (await fx.read((s) => s.listRuns()))[0];
      if (run?.state === 'running' && (await fx.read((s) => s.listTasks({ runId: run.id }))).some((t) => t.kind === 'plan-step' && t.status === 'running')) runId = run.id;
      else await new Promise((r) => setTimeout(r, 100));
    }
    expect(runId).toBeDefined();
    // A never step killed mid-command: its effect may or may not have happened.
    expect((await fx.cli(['cancel', runId!])).code).toBe(0);
    await running;
    for (let i = 0; i < 1800 && (await fx.read((s) => s.getRun(runId!)))!.state !== 'needs_reconciliation'; i++) await new Promise((r) => setTimeout(r, 100));
    expect((await fx.read((s) => s.getRun(runId!)))!.state).toBe('needs_reconciliation');
    const effect = (await fx.read((s) => s.listEffects({ runId: runId! })))[0]!;
    expect(effect.status).toBe('unknown');

    const server = await startServeChild(fx.store, fx.hostId);
    cleanups.push(() => server.stop());
    const chrome = await launchChromium();
    cleanups.push(() => chrome.close());
    const page = await chrome.browser.newPage();
    await page.goto(server.login!);
    await page.goto(`${server.url}/runs/${runId}`);
    await page.waitForSelector('#summary [data-state="needs_reconciliation"]');
    const buttons = await page.locator('#actions button').allTextContents();
    expect(buttons).toEqual(['accept: the uncertain effects happened, continue here', 'reject: they did not happen, continue', 'verify: ask the service again', 'fail the run']);

    // Verify: a plan step's effect has no verifier in this server; the page says what would work.
    await page.locator('#actions button:has-text("verify")').click();
    await page.waitForSelector('#said');
    const said = (await page.locator('#said').textContent())!;
    expect(said).toContain('no_verifier: this server has no verifier for effect kind');
    expect(said).toContain('Restart berth serve with --extension MODULE');
    expect(said).not.toMatch(/--accept|--reject-effect/);
    expect((await fx.read((s) => s.getRun(runId!)))!.state).toBe('needs_reconciliation');

    // Fail asks beside its button whether the effects happened; "not known" leaves them uncertain
    // (as berth reconcile --fail alone does: the run ends failed and never runs them again).
    const answers = await page.locator('#actions form:has(button:has-text("fail the run")) select[name="answer"] option').allTextContents();
    expect(answers).toEqual(['did the uncertain effects happen?', 'they happened', 'they did not happen', 'not known: leave them uncertain (never run again)']);

    // Fail, answering beside the button that the step's effect did not happen.
    await page.locator('#actions form:has(button:has-text("fail the run")) select[name="answer"]').selectOption('reject-effect');
    await page.locator('#actions button:has-text("fail the run")').click();
    await page.waitForSelector('#summary [data-state="failed"]', { timeout: 180_000 });
    const after = (await fx.read((s) => s.getEffect(effect.id)))!;
    expect(after.status).toBe('failed');
    expect(after.receipt).toMatchObject({ by: 'user:web-tester', decision: 'reject' });
    const transitions = await fx.read((s) => s.listRunTransitions(runId!));
    expect(transitions.at(-1)).toMatchObject({ to: 'failed', actor: 'user:web-tester' });
  });
});
