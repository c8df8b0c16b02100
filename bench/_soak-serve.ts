/**
 * Soak of an in-process `berth serve` (the CLI's startServe over a SQLite store, describeRun as the
 * CLI wires it) as a long-lived server meets it:
 *   node --expose-gc --import tsx bench/_soak-serve.ts [CALLS=600] [DROPS=200]
 * 1. CALLS API and page calls (run, runs list, entries, run page, runs page);
 * 2. DROPS event-stream follows (run SSE, whole-store SSE, output SSE) that the client drops after its first bytes;
 * 3. /metrics scrapes at 1,000 / 5,000 / 20,000 runs: ms per scrape and rows the scrape read.
 * Samples: heap after gc, RSS, open fds, active handles, the commit feed's waiters and timer.
 */
import { processFigures } from './_soak-probe';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunState } from '../host/model';
import { startServe } from '../host/serve';
import { openSqliteStore, type Store } from '../host/store';
import { describeRun } from '../host/cli/commands/runs';
import { LocalArtifactStore } from '../host/artifacts';

const calls = Number(process.argv[2] ?? 600);
const drops = Number(process.argv[3] ?? 200);
const dir = mkdtempSync(join(tmpdir(), 'soak-serve-'));
const store = openSqliteStore(join(dir, 'berth.db'));
const STATES: RunState[] = ['completed', 'running', 'completed', 'needs_reconciliation'];
let made = 0;
async function addRuns(upTo: number) {
  for (; made < upTo; made++) {
    const i = made;
    const id = `run_soak${String(i).padStart(6, '0')}`;
    const to = STATES[i % STATES.length]!;
    await store.commit({
      sessionId: `ses_soak${i}`,
      label: 'submit',
      createSession: { meta: { plan: 'plan.yaml', name: `build-${i}` } },
      runs: [{ id, kind: 'plan', submissionId: null, rootTaskId: null, versions: {} }],
      runTransitions: [{ runId: id, from: 'admitted', to: 'running', actor: 'soak', reason: 'start' }, ...(to === 'running' ? [] : [{ runId: id, from: 'running' as const, to, actor: 'soak', reason: 'end' }])],
      fence: null,
    } as unknown as Parameters<Store['commit']>[0]);
  }
}
await addRuns(50);
const refuse = async () => { throw new Error('not in this probe'); };
const server = await startServe(
  {
    store,
    describe: (runId) => describeRun(store, runId, { newest: 100 }),
    ownerLine: async () => 'nobody',
    actions: { approve: refuse, deny: refuse, cancel: refuse, reconcile: refuse, judge: refuse, fork: refuse },
    artifacts: new LocalArtifactStore(join(dir, 'artifacts')),
    operator: 'user:soak',
    token: null,
  },
  { host: '127.0.0.1', port: 0 },
);
async function sample(what: string) {
  const figures = await processFigures(100);
  console.log(JSON.stringify({ what, ...figures }));
}
const get = async (path: string) => {
  const r = await fetch(server.url + path);
  await r.arrayBuffer();
  if (!r.ok) throw new Error(`${path}: ${r.status}`);
};
await sample('start');
for (let i = 0; i < calls; i++) {
  const id = `run_soak${String(i % 50).padStart(6, '0')}`;
  await get(`/api/v1/runs/${id}`);
  await get('/api/v1/runs?limit=20');
  await get(`/api/v1/runs/${id}/entries`);
  await get(`/runs/${id}`);
  await get('/');
  if ((i + 1) % (calls / 3) === 0) await sample(`calls ${i + 1}`);
}
const dropOne = async (path: string) => {
  const ctl = new AbortController();
  const r = await fetch(server.url + path, { signal: ctl.signal, headers: { accept: 'text/event-stream' } });
  const reader = r.body!.getReader();
  await reader.read();
  ctl.abort();
  await reader.cancel().catch(() => {});
};
for (let i = 0; i < drops; i++) {
  const id = `run_soak${String(1 + 4 * (i % 12)).padStart(6, '0')}`; // a running run: its stream stays open
  await dropOne(`/api/v1/runs/${id}/events`);
  await dropOne('/api/events');
  await dropOne(`/api/runs/${id}/output`).catch(() => {});
  if ((i + 1) % (drops / 2) === 0) {
    const feed = await connections();
    await sample(`drops ${i + 1} (server connections ${feed})`);
  }
}
async function connections() {
  const http = (server as unknown as { http?: { getConnections(cb: (e: unknown, n: number) => void): void } }).http;
  if (!http) return 'n/a';
  return new Promise((r) => http.getConnections((_e, n) => r(n)));
}
// /metrics reads every run and every snapshot of the store at each scrape.
for (const size of [1000, 5000, 20000]) {
  await addRuns(size);
  const t = [];
  for (let k = 0; k < 5; k++) {
    const t0 = performance.now();
    await get('/metrics');
    t.push(performance.now() - t0);
  }
  t.sort((a, b) => a - b);
  await sample(`metrics at ${size} runs: median ${t[2]!.toFixed(1)} ms per scrape`);
}
await server.close();
await store.close();
