/**
 * `npx tsx bench/_mcp-reconnect.ts [rounds]`: where `mcp.reconnect_resume_ms` goes. A session is
 * created, then each round SIGKILLs its server and starts `berth mcp --session S` again (as
 * bench/mcp.ts does), with BERTH_LOG_LEVEL=debug: the client's marks (spawned, connected, answered)
 * and the server's `timing` logs and log lines, each as ms since the spawn; medians over the rounds.
 * BENCH_BERTH_BIN: the CLI to run (default host/cli/bin.mjs); several, comma-separated, to compare
 * builds: round r's new server runs the (r mod n)-th, its order turning each cycle, medians per build.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import Dockerode from 'dockerode';
import { median } from './_stats';

const rounds = Number(process.argv[2] ?? 7);
const bins = (process.env.BENCH_BERTH_BIN ?? 'host/cli/bin.mjs').split(',');
const hostId = `bench-mcp-rc-${process.pid}`;
const docker = new Dockerode({ socketPath: '/var/run/docker.sock' });
const digest = (await docker.getImage('berth/tiny:latest').inspect()).Id;
const dir = mkdtempSync(join(tmpdir(), 'berth-mcp-rc-'));
writeFileSync(join(dir, 'env.yaml'), `kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${digest}" }\nsnapshot: { policy: never }\n`);

interface Server { client: Client; pid: number; marks: Map<string, number> }
async function connect(args: string[], bin = bins[0]!): Promise<Server> {
  const marks = new Map<string, number>();
  const t0 = Date.now();
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [bin, 'mcp', ...args, '--store', join(dir, 'berth.db')],
    env: { ...(process.env as Record<string, string>), BERTH_HOST_ID: hostId, BERTH_LOG_LEVEL: 'debug' },
    stderr: 'pipe',
  });
  let buf = '';
  transport.stderr!.on('data', (c: Buffer) => {
    buf += c.toString();
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      try {
        const j = JSON.parse(line) as { msg: string; phase?: string; time: number; ms?: number; level: number };
        if (process.env.RC_LINES) console.error(j.time - t0, line.slice(0, 300));
        const key = j.msg === 'timing' ? `timing ${j.phase}` : `log ${j.msg.slice(0, 60)}`;
        if (!marks.has(key)) marks.set(key, j.time - t0);
        if (j.msg === 'timing' && j.ms !== undefined && !marks.has(`  (${j.phase}: its ms)`)) marks.set(`  (${j.phase}: its ms)`, j.ms);
      } catch {
        // not a log line (DEBUG=modem: the engine's requests)
        if (process.env.RC_LINES) console.error(Date.now() - t0, line.slice(0, 200));
      }
    }
  });
  const client = new Client({ name: 'rc', version: '1.0.0' });
  await client.connect(transport);
  marks.set('client: connected', Date.now() - t0);
  return { client, pid: transport.pid!, marks };
}
const exec = async (s: Server) => {
  const r = await s.client.callTool({ name: 'exec', arguments: { command: 'true' } });
  if (r.isError) throw new Error(JSON.stringify(r.content));
  return r.structuredContent as { session: string };
};
try {
  let s = await connect(['--env', join(dir, 'env.yaml')]);
  const session = (await exec(s)).session;
  for (let i = 0; i < 3; i++) await exec(s);
  const all = new Map<string, Map<string, number[]>>(bins.map((b) => [b, new Map()]));
  const loads: number[] = [];
  for (let r = 0; r < rounds * bins.length; r++) {
    const cycle = Math.floor(r / bins.length);
    const bin = bins[(cycle % 2 ? bins.length - 1 - (r % bins.length) : r % bins.length)]!;
    process.kill(s.pid, 'SIGKILL');
    await s.client.close().catch(() => {});
    const t0 = Date.now();
    s = await connect(['--session', session], bin);
    await exec(s);
    s.marks.set('client: answered', Date.now() - t0);
    const of = all.get(bin)!;
    for (const [k, v] of s.marks) of.set(k, [...(of.get(k) ?? []), v]);
    loads.push(loadavg()[0]!);
  }
  await s.client.close();
  const first = all.get(bins[0]!)!;
  console.log('ms since spawn (medians):', bins.join('  '));
  for (const [k, v] of [...first].sort((a, b) => median(a[1]) - median(b[1]))) console.log(bins.map((b) => String(Math.round(median(all.get(b)!.get(k) ?? [NaN]))).padStart(6)).join(' '), ' ', k);
  console.log(`# ${rounds} rounds per build, load ${loads.map((l) => l.toFixed(1)).join(' ')}`);
} finally {
  for (const c of await docker.listContainers({ all: true, filters: { label: [`berth.host=${hostId}`] } })) await docker.getContainer(c.Id).remove({ force: true }).catch(() => {});
  rmSync(dir, { recursive: true, force: true });
}
