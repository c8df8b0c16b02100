/**
 * `npx tsx bench/_egress-proxy-cpu.ts [GETS]`: the egress proxy's own CPU per proxied GET, with the
 * proxy alone in a child process (bench/_egress-proxy-alone.ts) and the client and target here, one
 * connection per GET as busybox wget makes them. PROF=1 writes the child's CPU profile to
 * /tmp/tc/prof2 (where the time goes: mostly the socket writes, i.e. the kernel's TCP work).
 */
import { fork } from 'node:child_process';
import { createServer } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
const N = Number(process.argv[2] ?? 3000);
const script = process.argv[3] ?? 'bench/_egress-proxy-alone.ts';
const target = createServer((_req, res) => res.end('ok\n'));
await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
const tport = (target.address() as AddressInfo).port;
const child = fork(script, [String(tport)], { execArgv: [...(process.env.PROF ? ['--cpu-prof', '--cpu-prof-dir=/tmp/tc/prof2'] : []), '--import', 'tsx'] });
const ask = (m: string) => new Promise<string>((r) => { child.once('message', (x) => r(String(x))); if (m) child.send(m); });
const pport = Number(await ask(''));
const get = (port: number, direct: boolean) => new Promise<void>((resolve, reject) => {
  const s = connect(port, '127.0.0.1');
  const path = direct ? '/' : `http://127.0.0.1:${tport}/`;
  let got = '';
  s.on('connect', () => s.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${tport}\r\nUser-Agent: Wget\r\nConnection: close\r\n\r\n`));
  s.on('data', (d) => (got += d.toString('latin1')));
  s.on('end', () => (got.startsWith('HTTP/1.1 200') && got.endsWith('ok\n') ? resolve() : reject(new Error(`bad answer: ${got}`))));
  s.on('error', reject);
});
for (let i = 0; i < 500; i++) await get(pport, false);
for (let r = 0; r < 3; r++) {
  await ask('reset');
  const t = performance.now();
  for (let i = 0; i < N; i++) await get(pport, false);
  const wall = (performance.now() - t) / N;
  const cpu = Number(await ask('cpu')) / N;
  console.log(`proxy process CPU ${(cpu * 1000).toFixed(1)} µs/GET, wall ${(wall * 1000).toFixed(0)} µs/GET`);
}
child.send('exit');
target.close();
setTimeout(() => process.exit(0), 500);
