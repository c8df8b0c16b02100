/**
 * `npx tsx bench/_egress-hop.ts [ROUNDS] [BASE_DIR]`: what the egress proxy adds to a plain GET, on
 * the host (no container, no Docker bridge), one connection per GET as busybox wget makes them:
 * a raw socket sends `GET http://target/ HTTP/1.1` with `Connection: close` and reads to the end.
 *   direct   the same request straight to the target (origin-form)
 *   proxy    through this tree's EgressProxy
 *   base     through the EgressProxy of another tree (BASE_DIR, e.g. an export of main), when given
 * Rounds interleave the paths. BENCH_HOPS_CPU=1 reports process CPU per GET instead of wall time
 * (everything is in this process, so load stretches it far less than wall time).
 */
import { createServer } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { EgressProxy } from '../host/egress';
import { median } from './_stats';

const rounds = Number(process.argv[2] ?? 10);
const baseDir = process.argv[3];
const cpu = process.env.BENCH_HOPS_CPU === '1';
const target = createServer((_req, res) => res.end('ok\n'));
await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
const tport = (target.address() as AddressInfo).port;
const allow = [`127.0.0.1:${tport}`];
type ProxyLike = { listen(h: string): Promise<AddressInfo> };
const make = (P: new (o: ConstructorParameters<typeof EgressProxy>[0]) => ProxyLike) => new P({ allow, overrides: allow, runId: null, leaseId: null, record: () => {} });
const ports: Record<string, number> = { direct: tport, proxy: (await make(EgressProxy).listen('127.0.0.1')).port };
if (baseDir) {
  const base = (await import(`${baseDir}/host/egress/index.ts`)) as { EgressProxy: typeof EgressProxy };
  ports.base = (await make(base.EgressProxy).listen('127.0.0.1')).port;
}
const get = (port: number, direct: boolean) =>
  new Promise<void>((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    const path = direct ? '/' : `http://127.0.0.1:${tport}/`;
    let got = '';
    s.on('connect', () => s.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${tport}\r\nUser-Agent: Wget\r\nConnection: close\r\n\r\n`));
    s.on('data', (d) => (got += d.toString('latin1')));
    s.on('end', () => (got.startsWith('HTTP/1.1 200') && got.endsWith('ok\n') ? resolve() : reject(new Error(`bad answer: ${got}`))));
    s.on('error', reject);
  });
const one = async (k: string) => {
  const t = performance.now();
  const u = process.cpuUsage();
  await get(ports[k]!, k === 'direct');
  if (cpu) {
    const d = process.cpuUsage(u);
    return (d.user + d.system) / 1000;
  }
  return performance.now() - t;
};
for (let i = 0; i < 100; i++) for (const k of Object.keys(ports)) await one(k);
const ratios: Record<string, number[]> = {};
const abs: Record<string, number[]> = {};
for (let r = 0; r < rounds; r++) {
  const per: Record<string, number[]> = {};
  for (let i = 0; i < 100; i++) for (const k of Object.keys(ports)) (per[k] ??= []).push(await one(k));
  for (const k of Object.keys(per)) {
    (ratios[k] ??= []).push(median(per[k]!) / median(per.direct!));
    (abs[k] ??= []).push(...per[k]!);
  }
}
for (const k of Object.keys(ratios)) console.log(`${k.padEnd(7)} ${median(abs[k]!).toFixed(3)} ms  ${median(ratios[k]!).toFixed(2)}x`);
process.exit(0);
