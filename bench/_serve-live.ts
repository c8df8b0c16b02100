/**
 * serve.live_line_to_browser_ms_p50: a running step's output line, from the moment the step's
 * output writer receives it (what the sandbox's exec output callback does for each chunk) until the
 * run page open in Debian's chromium has appended it (the page records each chunk's arrival).
 * Both clocks are this machine's `Date.now()`. The hop from the container's stdout to the host's
 * callback is not in this figure (it is the engine's attach stream, a few ms).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import type { Json } from '../host/model';
import { OutputWriter } from '../host/output';
import type { Store } from '../host/store';
import type { Report } from './run';
import { median } from './_stats';

const LINES = Number(process.env.BENCH_SERVE_LIVE_LINES ?? 40);

export async function liveLineToBrowser(o: { url: string; token: string; writer: Store; input: Json; report: Report }): Promise<void> {
  const { writer } = o;
  const r = await writer.commit({
    sessionId: 'ses_live',
    label: 'start',
    createSession: {},
    runs: [{ id: 'run_live', kind: 'plan', submissionId: null, rootTaskId: 'root_live', versions: { kernel: '0.1.0' } }],
    tasks: [
      { id: 'root_live', runId: 'run_live', parentId: null, kind: 'plan', kindVersion: 1, phase: 'p', input: o.input },
      { id: 'step_live', runId: 'run_live', parentId: 'root_live', kind: 'plan-step', kindVersion: 1, phase: 'run', input: { index: 0, generation: 0 } },
    ],
    runTransitions: [{ runId: 'run_live', from: 'admitted', to: 'running', actor: 'bench', reason: 'start' }],
  });
  if (!r.ok) throw new Error('bench setup commit refused');
  const profile = mkdtempSync(join(tmpdir(), 'berth-bench-chromium-'));
  process.env.PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD = '1';
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', `--disk-cache-dir=${profile}`] });
  try {
    const page = await (await browser.newContext({ extraHTTPHeaders: { authorization: `Bearer ${o.token}` } })).newPage();
    await page.goto(`${o.url}/runs/run_live`);
    await page.waitForFunction(() => (window as unknown as { berthLive?: { outputSource?: EventSource } }).berthLive?.outputSource?.readyState === 1);
    const out = new OutputWriter(writer, { runId: 'run_live', source: 'step:0', label: 'one' });
    const samples: number[] = [];
    for (let i = 0; i < LINES; i++) {
      // A random gap, so lines land at every phase of the writer's flush and the feed's poll.
      await new Promise((res) => setTimeout(res, 20 + Math.random() * 80));
      const t0 = Date.now();
      out.push('stdout', `line ${i} of the bench\n`);
      const shown = await page.waitForFunction(
        (n) => {
          const live = (window as unknown as { berthLive: { output: Array<{ at: number }> } }).berthLive;
          const pre = document.querySelector('pre.live');
          return pre?.textContent?.includes(`line ${n} of the bench\n`) ? live.output[live.output.length - 1]!.at : false;
        },
        i,
        { polling: 5, timeout: 30_000 },
      );
      samples.push(Number(await shown.jsonValue()) - t0);
    }
    await out.end('exit 0');
    o.report('live_line_to_browser_ms_p50', median(samples), 'absolute');
  } finally {
    await browser.close().catch(() => {});
    rmSync(profile, { recursive: true, force: true });
  }
}
