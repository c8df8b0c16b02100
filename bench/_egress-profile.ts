/**
 * egress profile (not a suite): where a proxied GET's time goes, seen from the proxy's side.
 * `npx tsx bench/_egress-profile.ts`
 */
import Dockerode from 'dockerode';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { EGRESS_PROXY_PORT } from '../host/sandbox/sandbox-network';
import { newId } from '../host/support/ids';
import { median } from './_stats';
import { container, egressWorld } from './egress';
import dc from 'node:diagnostics_channel';

const IMAGE = 'berth/tiny:latest';
const GETS = 30;

async function timedExec(c: Dockerode.Container, cmd: string): Promise<number> {
  const t0 = performance.now();
  const exec = await c.exec({ Cmd: ['sh', '-c', cmd], AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({ hijack: true, stdin: false });
  stream.resume();
  await new Promise((r) => stream.on('end', r));
  return performance.now() - t0;
}

const docker = new Dockerode({ socketPath: '/var/run/docker.sock' });
const hostId = `bench-egress-${process.pid}`;
const leaseId = newId('lease');
const cleanup: Array<() => Promise<unknown>> = [];
try {
  const { open, gw, port, net, proxy } = await egressWorld(docker, hostId, leaseId, cleanup);
  // Phase marks per connection.
  const server = (proxy as unknown as { server: import('node:http').Server }).server;
  const phases: Record<string, number[]> = { accept_to_request: [], request_to_finish: [], finish_to_close: [], conn_total: [], gap_between_conns: [] };
  let lastClose = 0;
  server.prependListener('connection', (s: Socket) => {
    const t0 = performance.now();
    if (lastClose) phases.gap_between_conns!.push(t0 - lastClose);
    (s as Socket & { t0?: number }).t0 = t0;
    s.on('close', () => {
      lastClose = performance.now();
      phases.conn_total!.push(lastClose - t0);
      const f = (s as Socket & { tf?: number }).tf;
      if (f) phases.finish_to_close!.push(lastClose - f);
    });
  });
  server.prependListener('request', (req: IncomingMessage, res: ServerResponse) => {
    const s = req.socket as Socket & { t0?: number; tf?: number };
    const tr = performance.now();
    phases.accept_to_request!.push(tr - (s.t0 ?? tr));
    res.on('finish', () => {
      s.tf = performance.now();
      phases.request_to_finish!.push(s.tf - tr);
    });
  });
  const marks: Record<string, number[]> = { request_to_decided: [], decided_to_upstream_socket: [], upstream_socket_to_response: [], response_to_finish: [] };
  let tr = 0, td = 0, ts = 0, tu = 0;
  server.prependListener('request', () => { tr = performance.now(); });
  (proxy as unknown as { o: { record: () => void } }).o.record = () => { if (!td) { td = performance.now(); marks.request_to_decided!.push(td - tr); } };
  dc.subscribe('net.client.socket', () => { ts = performance.now(); if (td) marks.decided_to_upstream_socket!.push(ts - td); });
  dc.subscribe('http.client.response.finish', () => { tu = performance.now(); marks.upstream_socket_to_response!.push(tu - ts); });
  server.prependListener('request', (_q: IncomingMessage, res: ServerResponse) => res.on('finish', () => { marks.response_to_finish!.push(performance.now() - tu); td = 0; }));
  const proxyUrl = `http://${net.gateway}:${EGRESS_PROXY_PORT}`;
  const proxied = await container(docker, net.name, [`http_proxy=${proxyUrl}`], hostId);
  cleanup.push(() => proxied.remove({ force: true }));
  const direct = await container(docker, open.id, [], hostId);
  cleanup.push(() => direct.remove({ force: true }));
  const loop = `for i in $(seq ${GETS}); do busybox wget -q -O /dev/null http://${gw}:${port}/; done`;
  const tloop = `for i in $(seq ${GETS}); do busybox true; done`;
  await timedExec(proxied, loop);
  await timedExec(direct, loop);
  for (const k of Object.keys(phases)) phases[k]!.length = 0;
  for (const k of Object.keys(marks)) marks[k]!.length = 0;
  const p: number[] = [], d: number[] = [], t: number[] = [];
  for (let i = 0; i < 8; i++) {
    lastClose = 0;
    p.push(await timedExec(proxied, loop));
    d.push(await timedExec(direct, loop));
    t.push(await timedExec(direct, tloop));
  }
  console.log(`proxied GET ${(median(p) / GETS).toFixed(2)} ms, direct ${(median(d) / GETS).toFixed(2)} ms, busybox start ${(median(t) / GETS).toFixed(2)} ms, ratio ${median(p.map((x, i) => x / d[i]!)).toFixed(2)}`);
  for (const [k, v] of Object.entries(marks)) console.log(`  ${k}: p50 ${median(v).toFixed(2)} ms (n=${v.length})`);
  for (const [k, v] of Object.entries(phases)) console.log(`${k}: p50 ${median(v).toFixed(2)} ms (n=${v.length})`);
} finally {
  for (const c of cleanup.reverse()) await c().catch(() => {});
}
