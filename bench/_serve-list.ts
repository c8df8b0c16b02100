/**
 * The runs list among 10,000 runs (setup commits skip the per-commit fsync; the figures are reads):
 *   serve.runs_list_10k_ms        GET / (its first page of 50), median of 12 after 3 warm-ups
 *   serve.runs_filter_10k_ms      GET /?state=running
 *   serve.runs_search_10k_ms      GET /?q=nightly
 *   serve.list_bytes_per_commit   bytes an open list page (chromium) received, events and row
 *                                 fetches, per commit while 100 new runs are each created and moved
 *                                 to another state (200 commits)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import type { RunState } from '../host/model';
import { openSqliteStore, type Store } from '../host/store';
import type { Report } from './run';
import { median } from './_stats';

/** Runs in the list (the test of this bench uses fewer). */
const RUNS = Number(process.env.BENCH_SERVE_LIST_RUNS ?? 10_000);
const STATES: RunState[] = ['completed', 'running', 'completed', 'needs_reconciliation'];

async function addRun(store: Store, i: number, tag: string, to: RunState): Promise<void> {
  const id = `run_${tag}${String(i).padStart(5, '0')}`;
  const r = await store.commit({
    sessionId: `ses_${tag}${i}`,
    label: 'submit',
    createSession: { meta: { plan: 'plan.yaml', name: i % 100 === 0 ? `nightly-${i}` : `build-${i}` } },
    runs: [{ id, kind: 'plan', submissionId: null, rootTaskId: null, versions: {} }],
    runTransitions: [{ runId: id, from: 'admitted', to: 'running', actor: 'bench', reason: 'start' }, ...(to === 'running' ? [] : [{ runId: id, from: 'running' as const, to, actor: 'bench', reason: 'end' }])],
  });
  if (!r.ok) throw new Error('bench setup commit refused');
}

export async function runsList(o: { url: string; token: string; path: string; writer: Store; report: Report }): Promise<void> {
  const setup = openSqliteStore(o.path, { durability: 'normal' });
  try {
    for (let i = 0; i < RUNS; i++) await addRun(setup, i, 'l', STATES[i % STATES.length]!);
  } finally {
    await setup.close();
  }
  const headers = { authorization: `Bearer ${o.token}` };
  const get = async (path: string, must: string) => {
    const times: number[] = [];
    for (let i = 0; i < 15; i++) {
      const t0 = performance.now();
      const body = await (await fetch(`${o.url}${path}`, { headers })).text();
      times.push(performance.now() - t0);
      if (!body.includes(must)) throw new Error(`GET ${path} did not show ${must}`);
    }
    return median(times.slice(3));
  };
  o.report('runs_list_10k_ms', await get('/', 'page 1 of'), 'absolute');
  o.report('runs_filter_10k_ms', await get('/?state=running', `page 1 of ${Math.ceil((RUNS / 4 + 2) / 50)}`), 'absolute');
  o.report('runs_search_10k_ms', await get('/?q=nightly', `${RUNS / 100} run`), 'absolute');

  const profile = mkdtempSync(join(tmpdir(), 'berth-bench-chromium-'));
  process.env.PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD = '1';
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', `--disk-cache-dir=${profile}`] });
  try {
    const page = await (await browser.newContext({ extraHTTPHeaders: headers })).newPage();
    await page.goto(`${o.url}/`);
    await page.waitForFunction(() => (window as unknown as { berthLive: { state: string } }).berthLive.state === 'open');
    const bytes = () => page.evaluate(() => (window as unknown as { berthLive: { bytes: number; events: number[] } }).berthLive);
    const before = await bytes();
    let commits = 0;
    for (let i = 0; i < 100; i++) {
      await addRun(o.writer, i, 'n', 'running');
      commits++;
    }
    for (let i = 0; i < 100; i++) {
      const id = `run_n${String(i).padStart(5, '0')}`;
      const r = await o.writer.commit({ sessionId: `ses_n${i}`, label: 'end', runTransitions: [{ runId: id, from: 'running', to: 'completed', actor: 'bench', reason: 'end' }] });
      if (!r.ok) throw new Error('bench commit refused');
      commits++;
    }
    await page.waitForFunction((n) => (window as unknown as { berthLive: { events: number[] } }).berthLive.events.length >= n, before.events.length + commits, { timeout: 60_000 });
    await page.waitForFunction(() => document.querySelector('tr[data-run="run_n00099"] [data-state="completed"]') !== null, undefined, { timeout: 60_000 });
    const after = await bytes();
    o.report('list_bytes_per_commit', (after.bytes - before.bytes) / commits, 'absolute');
  } finally {
    await browser.close().catch(() => {});
    rmSync(profile, { recursive: true, force: true });
  }
}
