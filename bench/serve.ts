/**
 * `npm run bench -- serve`: `berth serve` on a SQLite store (in this process, writer on its own
 * connection like a separate host). Event-stream clients are fetch readers of /api/runs/:id/events
 * (what a browser's EventSource does on the wire).
 *   serve.commit_to_event_ms_p50   a commit until its event reaches a connected client
 *   serve.run_page_10k_ms          GET of a run page whose run has 10,000 entries (newest page shown)
 *   serve.streams_50_vs_1          commit-to-event p50 with 50 streams (every arrival) over 1 stream
 *                                  (streams_50_slowest_p50_ms: the last of the 50 per commit)
 *   serve.runs_list_10k_ms, runs_filter_10k_ms, runs_search_10k_ms, list_bytes_per_commit: bench/_serve-list.ts
 *   serve.live_line_to_browser_ms_p50  a line handed to a step's output writer (as the sandbox's
 *                                  output callback hands it) until the run page in chromium shows it
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { describeRun } from '../host/cli/commands/runs';
import { LocalArtifactStore } from '../host/artifacts';
import { startServe } from '../host/serve';
import { openSqliteStore } from '../host/store';
import type { Suite } from './run';
import { median } from './_stats';
import { loadPlan, PlanRunInputSchema } from '../host/plan';
import { plainJson, type Json } from '../host/model';
import { liveLineToBrowser } from './_serve-live';
import { runsList } from './_serve-list';

/**
 * A plan's root input as `berth run` commits it: the run page reads the plan (its steps, pending
 * ones included) from there. The run is never driven, so the image digest is never looked up.
 */
async function planInput(dir: string): Promise<Json> {
  mkdirSync(join(dir, 'ws'), { recursive: true });
  writeFileSync(join(dir, 'env.yaml'), `kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "sha256:${'0'.repeat(64)}" }\nresources: { memoryMb: 256, commandTimeoutS: 120 }\nlease: { ttlS: 600, heartbeatS: 10 }\n`);
  writeFileSync(join(dir, 'plan.yaml'), 'name: bench-serve\nenvironment: env.yaml\nworkspace: ws\nsteps:\n  - name: one\n    run: "true"\n  - name: two\n    run: "true"\n');
  const loaded = await loadPlan(join(dir, 'plan.yaml'));
  return plainJson(PlanRunInputSchema.parse({ planFile: loaded.file, plan: loaded.plan, environment: loaded.environment, envFingerprint: loaded.envFingerprint, workspaceDir: loaded.workspaceDir }));
}

const ROUNDS = Number(process.env.BENCH_SERVE_ROUNDS ?? 60);

/**
 * The clients live in a worker thread, as browsers live in other processes: their parsing does not
 * share the server's event loop. Each event's arrival is posted as an absolute high-resolution time.
 */
const CLIENTS = `
const { parentPort, workerData } = require('node:worker_threads');
const { url, headers, streams } = workerData;
const ctl = new AbortController();
parentPort.on('message', (m) => { if (m === 'stop') { ctl.abort(); process.exit(0); } });
let opened = 0;
for (let n = 0; n < streams; n++) {
  (async () => {
    const res = await fetch(url, { headers, signal: ctl.signal });
    if (++opened === streams) parentPort.postMessage({ open: true });
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read().catch(() => ({ done: true }));
      if (done) return;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf('\\n\\n')) >= 0) {
        const id = /^id: (\\d+)$/m.exec(buf.slice(0, i));
        if (id) parentPort.postMessage({ stream: n, seq: Number(id[1]), at: performance.timeOrigin + performance.now() });
        buf = buf.slice(i + 2);
      }
    }
  })();
}`;

function clients(url: string, headers: Record<string, string>, streams: number) {
  const worker = new Worker(CLIENTS, { eval: true, workerData: { url, headers, streams } });
  const arrivals = new Map<number, number[]>();
  const open = new Promise<void>((resolve) =>
    worker.on('message', (m: { open?: boolean; seq?: number; at?: number }) => {
      if (m.open) resolve();
      if (m.seq !== undefined) arrivals.set(m.seq, [...(arrivals.get(m.seq) ?? []), m.at!]);
    }),
  );
  return { open, arrivals, stop: () => worker.terminate() };
}

const serve: Suite = async (report) => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-bench-serve-'));
  const path = join(dir, 'berth.db');
  const writer = openSqliteStore(path);
  const reader = openSqliteStore(path);
  const token = 'b'.repeat(64);
  const server = await startServe(
    {
      store: reader,
      describe: (id) => describeRun(reader, id),
      ownerLine: async (run) => run.state,
      actions: { approve: async () => '', deny: async () => '', cancel: async () => '', reconcile: async () => '', judge: async () => '', fork: async () => ({ said: '', forkRunId: null }) },
      artifacts: new LocalArtifactStore(join(dir, 'artifacts')),
      operator: 'user:bench',
      token,
    },
    { host: '127.0.0.1', port: 0 },
  );
  const headers = { authorization: `Bearer ${token}` };
  try {
    const input = await planInput(dir);
    await writer.commit({
      sessionId: 'ses_b',
      label: 'start',
      createSession: {},
      runs: [{ id: 'run_b', kind: 'plan', submissionId: null, rootTaskId: 'root', versions: { kernel: '0.1.0' } }],
      tasks: [{ id: 'root', runId: 'run_b', parentId: null, kind: 'plan', kindVersion: 1, phase: 'p', input }],
      runTransitions: [{ runId: 'run_b', from: 'admitted', to: 'running', actor: 'bench', reason: 'start' }],
    });

    /** p50 over every (stream, commit) arrival, and p50 of the slowest stream per commit. */
    const latency = async (streams: number): Promise<{ each: number; slowest: number }> => {
      const after = await writer.lastCommitLogSeq();
      const c = clients(`${server.url}/api/runs/run_b/events?after=${after}`, headers, streams);
      await c.open;
      const samples: number[] = [];
      const slowest: number[] = [];
      for (let i = 0; i < ROUNDS; i++) {
        // A random gap, so commits land at every phase of the poll.
        await new Promise((r) => setTimeout(r, 10 + Math.random() * 40));
        const t0 = performance.timeOrigin + performance.now();
        await writer.commit({ sessionId: 'ses_b', label: 'bench.tick' });
        const seq = await writer.lastCommitLogSeq();
        while ((c.arrivals.get(seq)?.length ?? 0) < streams) await new Promise((r) => setTimeout(r, 1));
        const arrivals = c.arrivals.get(seq)!.map((at) => at - t0);
        samples.push(...arrivals);
        slowest.push(Math.max(...arrivals));
      }
      await c.stop();
      return { each: median(samples), slowest: median(slowest) };
    };
    const one = await latency(1);
    report('commit_to_event_ms_p50', one.each, 'absolute');
    const fifty = await latency(50);
    report('streams_50_p50_ms', fifty.each, 'absolute');
    report('streams_50_slowest_p50_ms', fifty.slowest, 'absolute');
    report('streams_50_vs_1', fifty.each / one.each, 'ratio');

    for (let b = 0; b < 20; b++) {
      await writer.commit({
        sessionId: 'ses_b',
        label: 'bench.entries',
        entries: Array.from({ length: 500 }, (_, i) => ({ id: `ent_${b}_${i}`, runId: 'run_b', kind: 'plan.step.output', body: { step: `s${b}`, exitCode: 0, stdoutTail: `line ${b * 500 + i} <b>not bold</b>\n`.repeat(20), stderrTail: '' } })),
      });
    }
    const times: number[] = [];
    for (let i = 0; i < 15; i++) {
      const t0 = performance.now();
      const res = await fetch(`${server.url}/runs/run_b`, { headers });
      const body = await res.text();
      times.push(performance.now() - t0);
      if (!body.includes('older entries')) throw new Error('the run page did not page its 10,000 entries');
    }
    report('run_page_10k_ms', median(times.slice(3)), 'absolute');

    await liveLineToBrowser({ url: server.url, token, writer, input, report });
    await runsList({ url: server.url, token, path, writer, report });
  } finally {
    await server.close();
    await writer.close();
    await reader.close();
    rmSync(dir, { recursive: true, force: true });
  }
};
export default serve;
