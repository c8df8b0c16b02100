/** `npx tsx bench/_long-page.ts STORE RUN`: the run page's size (KB) of one stored run, as bench/long.ts measures it. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LocalArtifactStore } from '../host/artifacts';
import { describeRun } from '../host/cli/commands/runs';
import { RUN_PAGE_NEWEST } from '../host/cli/commands/serve';
import { startServe } from '../host/serve';
import { openSqliteStore } from '../host/store';

const [path, runId] = process.argv.slice(2);
const reader = openSqliteStore(path!);
const dir = mkdtempSync(join(tmpdir(), 'berth-long-page-'));
const token = 'l'.repeat(64);
const server = await startServe(
  {
    store: reader,
    describe: (id) => describeRun(reader, id, { newest: RUN_PAGE_NEWEST }),
    ownerLine: async (run) => run.state,
    actions: { approve: async () => '', deny: async () => '', cancel: async () => '', reconcile: async () => '', judge: async () => '', fork: async () => ({ said: '', forkRunId: null }) },
    artifacts: new LocalArtifactStore(join(dir, 'artifacts')),
    operator: 'user:bench',
    token,
  },
  { host: '127.0.0.1', port: 0 },
);
const res = await fetch(`${server.url}/runs/${runId}`, { headers: { authorization: `Bearer ${token}` } });
console.log(`run_page_kb = ${((await res.arrayBuffer()).byteLength / 1024).toFixed(1)} (status ${res.status})`);
await server.close();
await reader.close();
rmSync(dir, { recursive: true, force: true });
