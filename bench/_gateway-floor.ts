/**
 * The floor of any forwarding hop written in Node, for bench/gateway.ts's figure (not a suite):
 * `npx tsx bench/_gateway-floor.ts`. The client (own process) calls the scripted provider (own
 * process) directly, through a raw TCP relay (bytes piped both ways, nothing parsed: no hop in
 * Node can do less), and through the bare HTTP pass-through shape; interleaved call by call.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { createConnection, createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { median } from './_stats';

function party(role: 'provider' | 'client'): Promise<{ child: ChildProcess; first: Record<string, unknown> }> {
  const child = fork(new URL('./_gateway-party.ts', import.meta.url).pathname, [role], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return new Promise((resolve) => child.once('message', (first) => resolve({ child, first: first as Record<string, unknown> })));
}

const provider = await party('provider');
const up = new URL(provider.first.url as string);
const relay = createServer((down) => {
  down.setNoDelay(true);
  const upstream = createConnection({ host: up.hostname, port: Number(up.port) });
  upstream.setNoDelay(true);
  down.pipe(upstream);
  upstream.pipe(down);
  const end = () => {
    down.destroy();
    upstream.destroy();
  };
  down.on('error', end);
  upstream.on('error', end);
});
await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
const port = (relay.address() as AddressInfo).port;
const targets = [
  { url: provider.first.url as string, key: 'k' },
  { url: `http://127.0.0.1:${port}${up.pathname}`, key: 'k' },
];
const { child } = await party('client');
const times = await new Promise<number[][][]>((resolve) => {
  child.once('message', (m) => resolve((m as { times: number[][][] }).times));
  child.send({ targets, rounds: 15, perRound: 20, warm: 10 });
});
const ratios = times.map(([d, r]) => median(r!) / median(d!));
console.log(`direct ${median(times.flatMap((t) => t[0]!)).toFixed(2)} ms  raw relay ${median(times.flatMap((t) => t[1]!)).toFixed(2)} ms  relay_vs_direct ${median(ratios).toFixed(2)}x`);
relay.close();
provider.child.send({ stop: true });
