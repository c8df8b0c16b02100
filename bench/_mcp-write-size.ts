/**
 * Probe: what a large `write_file` costs through `berth mcp` on stdio, per MiB, against a raw
 * `putArchive` of the same bytes into a container of the same image.
 * `npx tsx bench/_mcp-write-size.ts [MIB,...] [REPEATS]` (after `npm run build`; it runs host/cli/bin.mjs).
 * `BIN=PATH` runs another bundle (an A/B against a build of another commit); `KEEP=1` keeps the store and names it; `PROF=1` writes a CPU profile of the server to .prof/ when it exits; `HTTP=1` uses `berth mcp --http`.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import Dockerode from 'dockerode';
import { pack } from 'tar-stream';

const sizes = (process.argv[2] ?? '1,4,8').split(',').map(Number);
const repeats = Number(process.argv[3] ?? 3);
const hostId = `bench-mcp-write-${process.pid}`;
const docker = new Dockerode({ socketPath: '/var/run/docker.sock' });
const digest = (await docker.getImage('berth/tiny:latest').inspect()).Id;
const dir = mkdtempSync(join(tmpdir(), 'berth-mcp-write-'));
writeFileSync(join(dir, 'env.yaml'), `kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${digest}" }\nresources: { diskMb: 2048 }\nsnapshot: { policy: never }\n`);
const prof = process.env.PROF ? ['--cpu-prof', '--cpu-prof-dir', '.prof'] : [];
const env = { ...(process.env as Record<string, string>), BERTH_HOST_ID: hostId };
const args = [process.env.BIN ?? 'host/cli/bin.mjs', 'mcp', '--env', join(dir, 'env.yaml'), '--store', join(dir, 'berth.db')];

async function connect(): Promise<{ client: Client; stop(): Promise<void> }> {
  const client = new Client({ name: 'bench', version: '1.0.0' });
  if (!process.env.HTTP) {
    await client.connect(new StdioClientTransport({ command: process.execPath, args: [...prof, ...args], env, stderr: 'inherit' }));
    return { client, stop: () => client.close() };
  }
  const child = spawn(process.execPath, [...prof, ...args, '--http', '--port', '0', '--token-file', join(dir, 'token')], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise<string>((resolve) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d;
      const m = /(http:\/\/\S+\/mcp)/.exec(out);
      if (m) resolve(m[1]!);
    });
  });
  const token = readFileSync(join(dir, 'token'), 'utf8').trim();
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  return { client, stop: async () => (await client.close(), child.kill('SIGINT'), await new Promise((r) => child.once('exit', r))) };
}

/** Text of `mib` MiB: printable, varied, so neither compression nor a cache flatters it. */
const content = (mib: number) => Array.from({ length: mib * 16384 }, (_, i) => `${String(i).padStart(10, '0')} ${'abcdefghijklmnopqrstuvwxyz0123456789'.repeat(1)}${'x'.repeat(17)}\n`).join('');

async function rawPut(mib: number): Promise<number[]> {
  const c = await docker.createContainer({ Image: digest, Cmd: ['sleep', '600'], Labels: { 'berth.host': hostId } });
  await c.start();
  const bytes = Buffer.from(content(mib));
  const times: number[] = [];
  try {
    for (let i = 0; i < repeats; i++) {
      const t = performance.now();
      const p = pack();
      p.entry({ name: `raw-${i}.txt`, size: bytes.length, mode: 0o644 }, bytes);
      p.finalize();
      const chunks: Buffer[] = [];
      for await (const x of p) chunks.push(x as Buffer);
      await c.putArchive(Buffer.concat(chunks), { path: '/tmp' });
      times.push(performance.now() - t);
    }
  } finally {
    await c.remove({ force: true });
  }
  return times;
}

const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
try {
  const { client, stop } = await connect();
  await client.callTool({ name: 'write_file', arguments: { path: 'warm.txt', content: 'warm\n' } });
  for (const mib of sizes) {
    const text = content(mib);
    const times: number[] = [];
    for (let i = 0; i < repeats; i++) {
      const t = performance.now();
      const r = await client.callTool({ name: 'write_file', arguments: { path: `big-${mib}-${i}.txt`, content: text } }, undefined, { timeout: 600_000 });
      times.push(performance.now() - t);
      if (r.isError) throw new Error(JSON.stringify(r.content).slice(0, 500));
    }
    const raw = await rawPut(mib);
    console.log(`${mib} MiB: write_file ${times.map((x) => Math.round(x)).join(' ')} ms (median ${Math.round(med(times))}, ${Math.round(med(times) / mib)} ms/MiB); raw putArchive ${raw.map((x) => Math.round(x)).join(' ')} ms (median ${Math.round(med(raw))})`);
  }
  await stop();
} finally {
  for (const c of await docker.listContainers({ all: true, filters: { label: [`berth.host=${hostId}`] } })) await docker.getContainer(c.Id).remove({ force: true }).catch(() => {});
  if (process.env.KEEP) console.log('kept', dir);
  else rmSync(dir, { recursive: true, force: true });
}
