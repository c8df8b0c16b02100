/**
 * `npx tsx bench/mcp-profile.ts [calls]`: a CPU profile (node --cpu-prof) of `berth mcp` serving
 * MCP `exec` calls of `true` over stdio, written to .prof/ when the server exits; what the
 * `mcp.tool_call_ms` figure of bench/mcp.ts pays for, seen from the server.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import Dockerode from 'dockerode';

const calls = Number(process.argv[2] ?? 30);
const hostId = `bench-mcp-prof-${process.pid}`;
const docker = new Dockerode({ socketPath: '/var/run/docker.sock' });
const digest = (await docker.getImage('berth/tiny:latest').inspect()).Id;
const dir = mkdtempSync(join(tmpdir(), 'berth-mcp-prof-'));
writeFileSync(join(dir, 'env.yaml'), `kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${digest}" }\nsnapshot: { policy: never }\n`);
async function connect(args: string[]): Promise<Client> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: ['--cpu-prof', '--cpu-prof-dir', '.prof', 'host/cli/bin.mjs', 'mcp', ...args, '--store', join(dir, 'berth.db')],
    env: { ...(process.env as Record<string, string>), BERTH_HOST_ID: hostId },
    stderr: 'inherit',
  });
  const client = new Client({ name: 'prof', version: '1.0.0' });
  await client.connect(transport);
  return client;
}
try {
  const client = await connect(['--env', join(dir, 'env.yaml')]);
  let session = '';
  const times: number[] = [];
  for (let i = 0; i < calls; i++) {
    const t = performance.now();
    const r = await client.callTool({ name: 'exec', arguments: { command: 'true' } });
    times.push(performance.now() - t);
    session = (r.structuredContent as { session: string }).session;
  }
  console.log('ms per call', times.map((t) => Math.round(t)).join(' '));
  await client.close();
  // A second server on the same session: its profile is what a reconnect pays (start, claim, verify, first call).
  const t = performance.now();
  const again = await connect(['--session', session]);
  await again.callTool({ name: 'exec', arguments: { command: 'true' } });
  console.log('resume ms', Math.round(performance.now() - t));
  await again.close();
  // The store commits the calls made, by label: each is one fsync under synchronous = FULL.
  const { openSqliteStore } = await import('../host/store');
  const store = openSqliteStore(join(dir, 'berth.db'));
  const labels = new Map<string, number>();
  for (const c of await store.listCommitLog({ sessionId: session })) labels.set(c.label, (labels.get(c.label) ?? 0) + 1);
  console.log(`commits for ${calls + 2} calls:`, Object.fromEntries([...labels].sort((a, b) => b[1] - a[1])));
  await store.close();
} finally {
  for (const c of await docker.listContainers({ all: true, filters: { label: [`berth.host=${hostId}`] } })) await docker.getContainer(c.Id).remove({ force: true }).catch(() => {});
  rmSync(dir, { recursive: true, force: true });
}
