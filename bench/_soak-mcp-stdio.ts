/**
 * Soak of a real `berth mcp` on stdio (host/cli/bin.mjs, spawned by the MCP SDK's stdio client) on
 * berth/tiny with a SQLite store: CALLS `exec true` one after another, sampling the server
 * process's RSS (VmRSS) and open fds from /proc every CALLS/5 calls (npm run -s build first).
 *   node --import tsx bench/_soak-mcp-stdio.ts [CALLS=300]
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { requireEngine, requireTinyImage } from '../test/support/docker-engine';

const calls = Number(process.argv[2] ?? 300);
const docker = await requireEngine();
const image = await requireTinyImage(docker);
const dir = mkdtempSync(join(tmpdir(), 'soak-mcp-stdio-'));
mkdirSync(join(dir, 'ws'));
const env = join(dir, 'env.yaml');
writeFileSync(env, `kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${image}" }\nresources: { memoryMb: 256, commandTimeoutS: 60 }\nlease: { ttlS: 600, heartbeatS: 10 }\nsnapshot: { policy: never }\n`);
const hostId = `soak-mcp-stdio-${process.pid}`;
const transport = new StdioClientTransport({
  command: process.execPath,
  args: ['host/cli/bin.mjs', 'mcp', '--env', env, '--workspace', join(dir, 'ws'), '--store', join(dir, 'berth.db')],
  env: { ...(process.env as Record<string, string>), BERTH_HOST_ID: hostId },
  stderr: 'ignore',
});
const client = new Client({ name: 'soak', version: '1.0.0' });
await client.connect(transport);
const pid = transport.pid!;
const sample = async (what: string) => {
  const rss = Number(/^VmRSS:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
  const label = [`berth.host=${hostId}`];
  const containers = (await docker.listContainers({ all: true, filters: { label } })).length;
  console.log(JSON.stringify({ what, serverRssMB: +rss.toFixed(1), serverFds: readdirSync(`/proc/${pid}/fd`).length, containers }));
};
const exec = async () => {
  const r = (await client.callTool({ name: 'exec', arguments: { command: 'true' } })) as CallToolResult;
  if (r.isError) throw new Error(`exec failed: ${JSON.stringify(r.content)}`);
};
await exec();
await sample('first call');
let t0 = Date.now();
for (let i = 1; i <= calls; i++) {
  await exec();
  if (i % (calls / 5) === 0) {
    // The last interval's pace: a cost that grows with the session's calls shows here.
    await sample(`calls ${i} (${Math.round((Date.now() - t0) / (calls / 5))} ms/call over the last ${calls / 5})`);
    t0 = Date.now();
  }
}
await client.close();
// The session's sandbox stays leased for the next server (by design): removed here.
for (const c of await docker.listContainers({ all: true, filters: { label: [`berth.host=${hostId}`] } })) await docker.getContainer(c.Id).remove({ force: true });
for (const n of await docker.listNetworks({ filters: { label: [`berth.host=${hostId}`] } })) await docker.getNetwork(n.Id).remove().catch(() => {});
