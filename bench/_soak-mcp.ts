/**
 * Soak of an in-process `berth mcp --http` (startMcpHttp over McpSessions, as the CLI wires it) on
 * berth/tiny with a SQLite store:
 *   node --expose-gc --import tsx bench/_soak-mcp.ts [CALLS=200] [CLIENTS=100]
 * 1. CALLS `exec true` through one client; 2. CLIENTS clients that each connect, call once and close.
 * Samples: heap after gc, RSS, open fds, active handles, the sessions' private maps, the runtime
 * kernel's held() and the listeners on its stop signal, containers and networks of this host id.
 */
import { processFigures } from './_soak-probe';
import { getEventListeners } from 'node:events';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import pino from 'pino';
import { checkSupported, loadEnvironment, requireLocked } from '../environment';
import { Berth } from '../host/api/berth';
import { assemble } from '../host/api/assemble';
import { McpSessions, startMcpHttp } from '../host/mcp';
import type { HostRuntime } from '../host/runtime/host-runtime';
import { requireEngine, requireTinyImage } from '../test/support/docker-engine';

const calls = Number(process.argv[2] ?? 200);
const clients = Number(process.argv[3] ?? 100);
const docker = await requireEngine();
const image = await requireTinyImage(docker);
const dir = mkdtempSync(join(tmpdir(), 'soak-mcp-'));
mkdirSync(join(dir, 'ws'));
const envFile = join(dir, 'env.yaml');
writeFileSync(envFile, `kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${image}" }\nresources: { memoryMb: 256, commandTimeoutS: 60 }\nlease: { ttlS: 600, heartbeatS: 10 }\nsnapshot: { policy: never }\n`);
const environment = await loadEnvironment(envFile);
checkSupported(environment);
requireLocked(environment);
const hostId = `soak-mcp-${process.pid}`;
const parts = assemble({ store: join(dir, 'berth.db'), hostId, logger: pino({ level: 'silent' }) });
const berth = Berth.from(parts);
const sessions = new McpSessions({ berth, environment, workspaceDir: join(dir, 'ws') });
const server = await startMcpHttp(berth, sessions, { host: '127.0.0.1', port: 0, token: null });

async function sample(what: string) {
  const figures = await processFigures(100);
  const s = sessions as unknown as Record<string, unknown>;
  const maps = Object.fromEntries(Object.entries(s).filter(([, v]) => v instanceof Map || v instanceof Set).map(([k, v]) => [k, (v as Map<unknown, unknown>).size]));
  const lock = s.lock as Record<string, unknown>;
  for (const [k, v] of Object.entries(lock)) if (v instanceof Map || v instanceof Set) maps[`lock.${k}`] = v.size;
  const rt = s.rt ? ((await s.rt) as HostRuntime) : undefined;
  const kernel = rt?.kernel as unknown as { held?: () => unknown; stopped?: AbortSignal } | undefined;
  const label = [`berth.host=${hostId}`];
  const containers = (await docker.listContainers({ all: true, filters: { label } })).length;
  const networks = (await docker.listNetworks({ filters: { label } })).length;
  console.log(JSON.stringify({ what, ...figures, maps, held: kernel?.held?.(), stopListeners: kernel?.stopped ? getEventListeners(kernel.stopped, 'abort').length : null, containers, networks }));
}
async function connect() {
  const client = new Client({ name: 'soak', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(server.url)));
  return client;
}
async function exec(client: Client) {
  const r = (await client.callTool({ name: 'exec', arguments: { command: 'true' } })) as CallToolResult;
  if (r.isError) throw new Error(`exec failed: ${JSON.stringify(r.content)}`);
}
const one = await connect();
await exec(one);
await sample('first call');
const t0 = Date.now();
for (let i = 1; i <= calls; i++) {
  await exec(one);
  if (i % (calls / 4) === 0) await sample(`calls ${i} (${Math.round((Date.now() - t0) / i)} ms/call)`);
}
await one.close();
for (let i = 1; i <= clients; i++) {
  const c = await connect();
  await exec(c);
  await c.close();
  if (i % (clients / 2) === 0) await sample(`clients ${i}`);
}
await server.close();
await sessions.close();
await sample('closed');
await parts.store.close();
// The session's sandbox stays leased for the next server (by design): removed here.
for (const c of await docker.listContainers({ all: true, filters: { label: [`berth.host=${hostId}`] } })) await docker.getContainer(c.Id).remove({ force: true });
