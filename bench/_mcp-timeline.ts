/**
 * `npx tsx bench/_mcp-timeline.ts [calls]`: where one MCP `exec` of `true` spends its wall time,
 * from the client's send to its answer, by the commits the call made (each commit's `at`).
 * Prints, per commit label, the median gap from the previous mark (client send first).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import Dockerode from 'dockerode';
import { median } from './_stats';

const calls = Number(process.argv[2] ?? 30);
const hostId = `bench-mcp-tl-${process.pid}`;
const docker = new Dockerode({ socketPath: '/var/run/docker.sock' });
const digest = (await docker.getImage('berth/tiny:latest').inspect()).Id;
const dir = mkdtempSync(join(tmpdir(), 'berth-mcp-tl-'));
writeFileSync(join(dir, 'env.yaml'), `kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "${digest}" }\nsnapshot: { policy: never }\n`);
try {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [...(process.env.BENCH_MCP_PROF ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_MCP_PROF] : []), process.env.BIN ?? 'host/cli/bin.mjs', 'mcp', '--env', join(dir, 'env.yaml'), '--store', join(dir, 'berth.db')],
    env: { ...(process.env as Record<string, string>), BERTH_HOST_ID: hostId },
    stderr: process.env.TL_STDERR ? 'inherit' : 'ignore',
  });
  const client = new Client({ name: 'tl', version: '1.0.0' });
  await client.connect(transport);
  let session = '';
  // The server's CPU time (user + system, clock ticks of 10 ms) over the measured calls: what a call costs the host, whatever the load.
  const cpuTicks = () => {
    const f = readFileSync(`/proc/${transport.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return Number(f[11]) + Number(f[12]);
  };
  let cpu0 = 0;
  const marks: Array<{ sent: number; answered: number }> = [];
  for (let i = 0; i < calls + 3; i++) {
    if (i === 3) cpu0 = cpuTicks();
    const sent = Date.now();
    const r = await client.callTool({ name: 'exec', arguments: { command: 'true' } });
    marks.push({ sent, answered: Date.now() });
    session = (r.structuredContent as { session: string }).session;
  }
  const cpuMs = ((cpuTicks() - cpu0) * 10) / calls;
  await client.close();
  const { openSqliteStore } = await import('../host/store');
  const store = openSqliteStore(join(dir, 'berth.db'));
  const log = await store.listCommitLog({ sessionId: session });
  await store.close();
  const gaps = new Map<string, number[]>();
  const add = (k: string, v: number) => gaps.set(k, [...(gaps.get(k) ?? []), v]);
  const totals: number[] = [];
  for (const m of marks.slice(3)) {
    const mine = log.filter((c) => c.at >= m.sent && c.at <= m.answered);
    let prev = m.sent;
    for (const c of mine) {
      add(c.label, c.at - prev);
      prev = c.at;
    }
    add('(answer)', m.answered - prev);
    totals.push(m.answered - m.sent);
  }
  for (const [k, v] of gaps) console.log(`${median(v).toFixed(1).padStart(6)} ms  ${k}  (n=${v.length})`);
  console.log(`${median(totals).toFixed(1).padStart(6)} ms  total`);
  console.log(`${cpuMs.toFixed(1).padStart(6)} ms  server CPU per call`);
} finally {
  for (const c of await docker.listContainers({ all: true, filters: { label: [`berth.host=${hostId}`] } })) await docker.getContainer(c.Id).remove({ force: true }).catch(() => {});
  rmSync(dir, { recursive: true, force: true });
}
