/// <reference lib="dom" />
import { afterEach, describe, expect, it } from 'vitest';
import { ENTRY, type ToolResultEntry } from '../../host/agent';
import { agentWorld, type AgentWorld } from '../support/agent-fixture';
import { planFixture } from '../support/plan-fixture';
import { launchChromium, startServeChild } from '../support/serve-browser';

// Actions clicked in Debian's headless chromium on `berth serve` (a child process), on a real store and engine.
const cleanups: Array<() => Promise<void>> = [];
// The cleanups remove each test's containers and images and check its store: over a minute on a loaded machine.
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch((e) => console.error(e));
}, 300_000);

async function browserPage(login: string) {
  const chrome = await launchChromium();
  cleanups.push(() => chrome.close());
  const page = await chrome.browser.newPage();
  let dialogs = 0;
  page.on('dialog', (d) => (dialogs++, void d.dismiss()));
  await page.goto(login);
  return { page, dialogs: () => dialogs };
}

describe('acting on runs from the page', { timeout: 300_000 }, () => {
  it('approves one waiting tool call and denies another from the page: the approved one runs once with the operator as actor, the denied one never runs', async () => {
    const w: AgentWorld = await agentWorld([
      {
        toolCalls: [
          { name: 'exec', arguments: { command: 'echo approved-ran >> /tmp/a.log; cat /tmp/a.log' } },
          { name: 'exec', arguments: { command: 'echo denied-ran >> /tmp/b.log; cat /tmp/b.log' } },
        ],
      },
      { content: 'finished <script>alert(1)</script>' },
    ]);
    cleanups.push(() => w.cleanup());
    const { run } = await w.start('two calls, one approved', { settings: { requireApproval: ['exec'] } });
    await w.rt.kernel.waitForRun(run.id, { states: ['awaiting_approval'] });
    const server = await startServeChild(w.storePath, w.hostId);
    cleanups.push(() => server.stop());
    const { page, dialogs } = await browserPage(server.login!);
    await page.goto(`${server.url}/runs/${run.id}`);
    await page.waitForSelector('#approvals tr[data-approval] button');
    const rows = page.locator('#approvals tr[data-approval]');
    expect(await rows.count()).toBe(2);
    // The page shows the exact scope digest each button approves.
    const digests = await page.locator('#approvals code.digest').allTextContents();
    for (const d of digests) expect(d).toMatch(/^sha256:[0-9a-f]{64}$/);
    const first = await rows.nth(0).getAttribute('data-approval');
    const second = await rows.nth(1).getAttribute('data-approval');
    await page.locator(`#approvals tr[data-approval="${first}"] button:has-text("approve")`).click();
    await page.waitForSelector('#said');
    expect(await page.locator('#said').textContent()).toContain('approved');
    await page.locator(`#approvals tr[data-approval="${second}"] button:has-text("deny")`).click();
    await page.waitForSelector(`#approvals tr[data-approval="${second}"] .approval-state:has-text("denied")`);

    expect((await w.rt.kernel.waitForRun(run.id)).state).toBe('completed');
    await page.waitForSelector('#summary [data-state="completed"]');
    expect(await page.locator(`#approvals tr[data-approval="${first}"] .approval-state`).textContent()).toContain('approved by user:web-tester');
    expect(await page.locator(`#approvals tr[data-approval="${second}"] .approval-state`).textContent()).toContain('denied by user:web-tester');
    const results = (await w.rt.store.listEntries(run.sessionId)).filter((e) => e.kind === ENTRY.toolResult).map((e) => e.body as unknown as ToolResultEntry);
    expect(results.map((r) => r.status).sort()).toEqual(['denied', 'ok']);
    const ok = results.find((r) => r.status === 'ok')!;
    expect(ok.content.match(/^approved-ran$/gm)).toHaveLength(1);
    expect(results.map((r) => r.content).join('\n')).not.toContain('denied-ran');
    // The model's <script> is text in the conversation.
    await page.waitForFunction(() => document.querySelector('#record')?.textContent?.includes('finished <script>alert(1)</script>'));
    expect(await page.locator('#record script').count()).toBe(0);
    // Each tool call with its replay policy: the approved exec ran under `never`; the denied one never ran.
    const record = (await page.locator('#record').textContent())!;
    expect(record).toMatch(/replay never/);
    expect(record).toContain('replay — (never ran)');
    expect(await page.locator('#cost .tokens').textContent()).toMatch(/tokens: \d+ prompt/);
    expect(dialogs()).toBe(0);
  });

  it('records one approval when approve is double-clicked on the page: the call runs once and the second click is answered as already approved', async () => {
    const w: AgentWorld = await agentWorld([{ toolCalls: [{ name: 'exec', arguments: { command: 'echo ran >> /tmp/once.log; cat /tmp/once.log' } }] }, { content: 'done' }]);
    cleanups.push(() => w.cleanup());
    const { run } = await w.start('one call, clicked twice', { settings: { requireApproval: ['exec'] } });
    await w.rt.kernel.waitForRun(run.id, { states: ['awaiting_approval'] });
    const server = await startServeChild(w.storePath, w.hostId);
    cleanups.push(() => server.stop());
    const { page } = await browserPage(server.login!);
    await page.goto(`${server.url}/runs/${run.id}`);
    const button = page.locator('#approvals tr[data-approval] button:has-text("approve")');
    await button.waitFor();
    // A person's double click: two presses some tens of ms apart.
    const box = (await button.boundingBox())!;
    await page.mouse.click(box.x + box.width / 2, box.y + box.height / 2, { clickCount: 1 });
    await new Promise((r) => setTimeout(r, 60));
    await page.mouse.click(box.x + box.width / 2, box.y + box.height / 2, { clickCount: 2 }).catch(() => {});
    await page.waitForSelector('#said');
    await page.waitForLoadState('load');
    expect(await page.locator('#said').textContent()).toMatch(/^(approved .* as user:web-tester|approval_not_pending: approval apr_\w+ \(call call_0_0\) is already approved by user:web-tester)/);
    expect((await w.rt.kernel.waitForRun(run.id)).state).toBe('completed');
    const approvals = (await w.rt.store.listCommitLog({ afterSeq: 0, sessionId: run.sessionId, limit: 1000 })).filter((c) => c.label === 'approval.approve');
    expect(approvals).toHaveLength(1);
    const results = (await w.rt.store.listEntries(run.sessionId)).filter((e) => e.kind === ENTRY.toolResult).map((e) => e.body as unknown as ToolResultEntry);
    expect(results.map((r) => r.content.match(/^ran$/gm)?.length)).toEqual([1]);
  });

  it('restores a chosen snapshot of a run in needs_reconciliation from the page and shows it finish', async () => {
    const fx = await planFixture([
      { name: 'one', run: 'echo one >> steps.log' },
      // Over the 1 MiB delta cap, so step two's snapshot is an engine commit, whole before its step
      // commits. As a delta its image was loaded into the engine in the background, and a load the
      // killed host had sent could finish after the test removed the image below: the resume then
      // restored it and completed (`expected +0 to be 3`, once in a loaded full suite).
      { name: 'two', run: 'echo two >> steps.log; head -c 1500000 /dev/urandom > pad.bin' },
      { name: 'three', run: 'cat steps.log' },
    ]);
    cleanups.push(() => fx.cleanup());
    const first = await fx.cli(['run', fx.plan, '--json'], { BERTH_FAULT: 'after:phase.complete:plan-step#2' });
    expect(first.signal, first.stderr).toBe('SIGKILL');
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    for (const l of await fx.read((s) => s.listLeases({}))) {
      if (l.releasedAt === null) await fx.docker.getContainer(l.containerId).remove({ force: true }).catch(() => {});
    }
    const snaps = await fx.read((s) => s.listSnapshots({ runId }));
    const newest = snaps.find((s) => s.checkpoint === 'step:1:two')!;
    const older = snaps.find((s) => s.checkpoint === 'step:0:one')!;
    const history = (await fx.docker.getImage(newest.imageId).history()) as Array<{ CreatedBy: string }>;
    expect(history[0]!.CreatedBy).not.toBe('berth snapshot delta');
    await fx.removeSnapshotImage(newest.id);
    expect((await fx.cli(['resume', runId])).code).toBe(3);

    const server = await startServeChild(fx.store, fx.hostId);
    cleanups.push(() => server.stop());
    const { page } = await browserPage(server.login!);
    await page.goto(server.url + '/');
    // Runs needing a person are marked first.
    expect(await page.locator(`tr.attention[data-run="${runId}"]`).count()).toBe(1);
    await page.goto(`${server.url}/runs/${runId}`);
    await page.waitForSelector('#summary [data-state="needs_reconciliation"]');
    await page.locator(`#snapshots tr[data-snapshot="${older.id}"] button:has-text("restore this snapshot")`).click();
    await page.waitForSelector('#summary [data-state="completed"]', { timeout: 180_000 });
    await page.waitForFunction(() => document.querySelector('#steps')?.textContent?.includes('three'));
    const transitions = await fx.read((s) => s.listRunTransitions(runId));
    expect(transitions.find((t) => t.to === 'reconciling')).toMatchObject({ actor: 'user:web-tester' });
    expect(transitions.find((t) => t.to === 'reconciling')!.reason).toContain(`continue from snapshot ${older.id}`);
    expect(await page.locator('#timeline').textContent()).toContain('user:web-tester');
    expect((await fx.read((s) => s.getRun(runId)))!.state).toBe('completed');
  });

  it('cancels a running plan from the page and accepts its interrupted step there: the run ends cancelled, both decisions with the operator as actor; the state filter lists it', async () => {
    // `never`: a cancelled safe step in a sandbox with no network changed nothing outside it and ends the run
    // cancelled at once; a never step's effect is a question for the operator, answered here from the page.
    const fx = await planFixture([{ name: 'long', run: 'echo started; sleep 120', replay: 'never' }]);
    cleanups.push(() => fx.cleanup());
    const running = fx.cli(['run', fx.plan]);
    let runId: string | undefined;
    for (let i = 0; i < 1200; i++) {
      const run = (await fx.read((s) => s.listRuns()))[0];
      if (run?.state === 'running' && (await fx.read((s) => s.listTasks({ runId: run.id }))).some((t) => t.kind === 'plan-step')) {
        runId = run.id;
        break;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(runId).toBeDefined();
    const server = await startServeChild(fx.store, fx.hostId);
    cleanups.push(() => server.stop());
    const { page } = await browserPage(server.login!);
    await page.goto(`${server.url}/runs/${runId}`);
    await page.locator('#actions button:has-text("cancel run")').click();
    await page.waitForSelector('#said');
    expect(await page.locator('#said').textContent()).toContain(`cancel of run ${runId} committed`);
    // A step killed mid-command leaves its effect unknown (as with berth cancel): the operator
    // answers from the page that it happened, and the cancellation completes.
    await page.waitForSelector('#summary [data-state="needs_reconciliation"]', { timeout: 180_000 });
    await page.locator('#actions button:has-text("accept")').click();
    await page.waitForSelector('#summary [data-state="cancelled"]', { timeout: 180_000 });
    await running;
    const transitions = await fx.read((s) => s.listRunTransitions(runId!));
    expect(transitions.find((t) => t.to === 'cancelling')).toMatchObject({ actor: 'user:web-tester', reason: 'cancelled by operator' });
    expect(transitions.find((t) => t.to === 'reconciling')).toMatchObject({ actor: 'user:web-tester' });
    const effects = await fx.read((s) => s.listEffects({ runId: runId! }));
    expect(effects.map((e) => [e.status, (e.receipt as { by?: string } | null)?.by])).toEqual([['confirmed', 'user:web-tester']]);
    const byState = async (state: string) => (await (await page.request.get(`${server.url}/api/runs?state=${state}`)).json()) as { runs: Array<{ run: { id: string } }> };
    expect((await byState('cancelled')).runs.map((r) => r.run.id)).toEqual([runId]);
    expect((await byState('running')).runs).toEqual([]);
  });
});
