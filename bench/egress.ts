/**
 * egress: a small HTTP GET through the host's egress proxy (internal network, INPUT rules, proxy on
 * the gateway) vs the same GET made directly from a container on an ordinary bridge network.
 * Each sample is one exec running 30 GETs, so exec overhead is shared; rounds interleave the two
 * paths; the figure is the median of the per-round ratios (each round sees the same machine load),
 * target ≤ 1.3.
 */
import Dockerode from 'dockerode';
import { createServer } from 'node:http';
import { EgressProxy } from '../host/egress';
import { createSandboxNetwork, EGRESS_PROXY_PORT, isolateBridge, removeBridgeRules, removeSandboxNetwork, ruleTag } from '../host/sandbox/sandbox-network';
import { newId } from '../host/support/ids';
import type { Report } from './run';
import { median } from './_stats';

const IMAGE = 'berth/tiny:latest';
const GETS = 30;
const ROUNDS = 15;

/** A labelled idle container on `network` (the bench and its profile script share it). */
export async function container(docker: Dockerode, network: string, env: string[], hostId: string) {
  const c = await docker.createContainer({ Image: IMAGE, Cmd: ['sh', '-c', 'while :; do sleep 1000; done'], Env: env, Labels: { 'berth.host': hostId }, HostConfig: { NetworkMode: network, Init: true } });
  await c.start();
  return c;
}

export async function timedExec(c: Dockerode.Container, cmd: string): Promise<number> {
  const t0 = performance.now();
  const exec = await c.exec({ Cmd: ['sh', '-c', cmd], AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({ hijack: true, stdin: false });
  stream.resume();
  await new Promise((r) => stream.on('end', r));
  const ms = performance.now() - t0;
  const code = (await exec.inspect()).ExitCode;
  if (code !== 0) throw new Error(`bench exec failed (exit ${code}): ${cmd}`);
  return ms;
}

/**
 * The bench's world: an open bridge whose gateway serves the target, a sandbox network isolated to
 * the proxy port, and the egress proxy on its gateway allowing only the target. Every part is
 * pushed on `cleanup` as it is made.
 */
export async function egressWorld(docker: Dockerode, hostId: string, leaseId: string, cleanup: Array<() => Promise<unknown>>) {
  // The open network the direct path uses; the target listens on its gateway, reachable from both paths.
  const open = await docker.createNetwork({ Name: `berth-bench-open-${process.pid}`, Driver: 'bridge', Labels: { 'berth.host': hostId } });
  cleanup.push(() => open.remove());
  const gw = ((await open.inspect()) as { IPAM: { Config: Array<{ Gateway: string }> } }).IPAM.Config[0]!.Gateway;
  const target = createServer((_req, res) => res.end('ok\n'));
  await new Promise<void>((r) => target.listen(0, gw, () => r()));
  cleanup.push(() => new Promise((r) => target.close(r)));
  const port = (target.address() as { port: number }).port;
  const net = await createSandboxNetwork(docker, { hostId, leaseId });
  cleanup.push(() => removeSandboxNetwork(docker, net.id));
  const tag = ruleTag(hostId, leaseId);
  await isolateBridge(net.bridge, [{ address: net.gateway, port: EGRESS_PROXY_PORT }], tag);
  cleanup.push(() => removeBridgeRules((t) => t === tag));
  const proxy = new EgressProxy({ allow: [`${gw}:${port}`], overrides: [`${gw}:${port}`], runId: null, leaseId, record: () => {} });
  await proxy.listen(net.gateway, EGRESS_PROXY_PORT);
  cleanup.push(() => proxy.close());
  return { open, gw, port, net, proxy };
}

export default async function egress(report: Report): Promise<void> {
  const docker = new Dockerode({ socketPath: process.env.BERTH_DOCKER_SOCKET ?? '/var/run/docker.sock' });
  const hostId = `bench-egress-${process.pid}`;
  const leaseId = newId('lease');
  const cleanup: Array<() => Promise<unknown>> = [];
  try {
    const { open, gw, port, net } = await egressWorld(docker, hostId, leaseId, cleanup);

    const proxyUrl = `http://${net.gateway}:${EGRESS_PROXY_PORT}`;
    const proxied = await container(docker, net.name, [`http_proxy=${proxyUrl}`], hostId);
    cleanup.push(() => proxied.remove({ force: true }));
    const direct = await container(docker, open.id, [], hostId);
    cleanup.push(() => direct.remove({ force: true }));

    const loop = `for i in $(seq ${GETS}); do busybox wget -q -O /dev/null http://${gw}:${port}/; done`;
    await timedExec(proxied, loop);
    await timedExec(direct, loop);
    const p: number[] = [];
    const d: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      p.push(await timedExec(proxied, loop));
      d.push(await timedExec(direct, loop));
    }
    report('proxied_vs_direct', median(p.map((x, i) => x / d[i]!)), 'ratio');
    report('proxied_get_ms', median(p) / GETS, 'absolute');
    report('direct_get_ms', median(d) / GETS, 'absolute');
  } finally {
    for (const c of cleanup.reverse()) await c().catch(() => {});
  }
}
