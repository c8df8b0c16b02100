/**
 * A/B of `berth mcp --http` per call, two built CLIs side by side (each its own server, store and
 * session on berth/tiny), rounds interleaved (the order alternates each round), the load printed
 * beside each figure:
 *   npx tsx bench/_mcp-http-ab.ts OLD_ROOT NEW_ROOT [ROUNDS=5] [CALLS=100]
 * Per round and side: CALLS `exec true` through one SDK client, then CALLS/4 more that ask for
 * progress (`onprogress`: the answer is an SSE stream on a server that streams progress), then
 * CALLS*2 `tools/list` each way (no sandbox, no store: the HTTP path's own cost, less of the
 * machine's noise). Figures: wall ms per request (the client's) and the server's CPU ms per
 * request (/proc utime+stime).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { requireEngine, requireTinyImage } from '../test/support/docker-engine';
import { removeHostArtifacts } from '../test/support/plan-fixture';
import { median } from './_stats';

const [oldRoot, newRoot] = [process.argv[2], process.argv[3]];
if (!oldRoot || !newRoot) throw new Error('usage: npx tsx bench/_mcp-http-ab.ts OLD_ROOT NEW_ROOT [ROUNDS] [CALLS]');
const rounds = Number(process.argv[4] ?? 5);
const calls = Number(process.argv[5] ?? 100);
const docker = await requireEngine();
const image = await requireTinyImage(docker);
const dir = mkdtempSync(join(tmpdir(), 'mcp-http-ab-'));
const envFile = join(dir, 'env.yaml');
writeFileSync(envFile, `kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${image}" }\nresources: { memoryMb: 256, commandTimeoutS: 60 }\nlease: { ttlS: 600, heartbeatS: 10 }\nsnapshot: { policy: never }\n`);

interface Side {
  name: string;
  hostId: string;
  child: ChildProcess;
  client: Client;
  wall: number[];
  cpu: number[];
  wallProgress: number[];
  cpuProgress: number[];
  list: number[];
  listCpu: number[];
  listProgress: number[];
  listProgressCpu: number[];
}

const cpuMs = (pid: number) => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
};

async function start(name: string, root: string): Promise<Side> {
  const ws = join(dir, `ws-${name}`);
  mkdirSync(ws);
  const hostId = `mcp-http-ab-${name}-${process.pid}`;
  const args = [join(root, 'host/cli/bin.mjs'), 'mcp', '--http', '--port', '0', '--no-token', '--env', envFile, '--workspace', ws, '--store', join(dir, `${name}.db`)];
  const child = spawn(process.execPath, args, { env: { ...process.env, BERTH_HOST_ID: hostId }, stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /(http:\/\/\S+\/mcp)/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.once('exit', (code) => reject(new Error(`${name} exited ${code}`)));
  });
  const client = new Client({ name: 'ab', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return { name, hostId, child, client, wall: [], cpu: [], wallProgress: [], cpuProgress: [], list: [], listCpu: [], listProgress: [], listProgressCpu: [] };
}

async function exec(s: Side, progress: boolean) {
  const r = (await s.client.callTool({ name: 'exec', arguments: { command: 'true' } }, undefined, progress ? { onprogress: () => {} } : undefined)) as CallToolResult;
  if (r.isError) throw new Error(`${s.name}: exec failed: ${JSON.stringify(r.content)}`);
}

async function round(s: Side, progress: boolean, n: number, one: (s: Side, progress: boolean) => Promise<unknown> = exec): Promise<[number, number]> {
  const c0 = cpuMs(s.child.pid!);
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await one(s, progress);
  return [(performance.now() - t0) / n, (cpuMs(s.child.pid!) - c0) / n];
}

const list = (s: Side, progress: boolean) => s.client.listTools(undefined, progress ? { onprogress: () => {} } : undefined);

const sides = [await start('old', oldRoot), await start('new', newRoot)];
// The session's first call leases its sandbox: warmed up outside the figures.
for (const s of sides) for (let i = 0; i < 5; i++) await exec(s, i % 2 === 0);
const load = () => loadavg()[0]!.toFixed(2);
for (let r = 0; r < rounds; r++) {
  for (const s of r % 2 ? [...sides].reverse() : sides) {
    const [wall, cpu] = await round(s, false, calls);
    const [wallP, cpuP] = await round(s, true, Math.max(1, calls / 4));
    s.wall.push(wall);
    s.cpu.push(cpu);
    s.wallProgress.push(wallP);
    s.cpuProgress.push(cpuP);
    const [l, lCpu] = await round(s, false, calls * 2, list);
    const [lP, lPCpu] = await round(s, true, calls * 2, list);
    s.list.push(l);
    s.listCpu.push(lCpu);
    s.listProgress.push(lP);
    s.listProgressCpu.push(lPCpu);
    console.log(
      `round ${r + 1} ${s.name}: exec true ${wall.toFixed(1)} ms/call wall, ${cpu.toFixed(2)} ms/call server CPU; with progress asked ${wallP.toFixed(1)} ms wall, ${cpuP.toFixed(2)} ms CPU; ` +
        `tools/list ${l.toFixed(2)} ms wall, ${lCpu.toFixed(2)} ms CPU; with progress asked ${lP.toFixed(2)} ms wall, ${lPCpu.toFixed(2)} ms CPU (load ${load()})`,
    );
  }
}
for (const s of sides) {
  console.log(`median ${s.name}: exec true ${median(s.wall).toFixed(1)} ms wall, ${median(s.cpu).toFixed(2)} ms CPU; with progress asked ${median(s.wallProgress).toFixed(1)} ms wall, ${median(s.cpuProgress).toFixed(2)} ms CPU; tools/list ${median(s.list).toFixed(2)} ms wall, ${median(s.listCpu).toFixed(2)} ms CPU; with progress asked ${median(s.listProgress).toFixed(2)} ms wall, ${median(s.listProgressCpu).toFixed(2)} ms CPU`);
}
for (const s of sides) {
  await s.client.close();
  s.child.kill('SIGTERM');
  await new Promise((r) => s.child.once('exit', r));
  await removeHostArtifacts(docker, s.hostId);
}
rmSync(dir, { recursive: true, force: true });
