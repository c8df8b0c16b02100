/**
 * exec timeline (not a suite): where a `lease.exec` spends its time against a raw exec of the
 * same command, in one sandbox, interleaved: marks at each engine call, the first output byte,
 * the stream's end and the `exec_die` event's arrival. `npx tsx bench/_exec-timeline.ts [ROUNDS]`
 */
import Dockerode from 'dockerode';
import { EngineEvents } from '../host/sandbox/engine-events';
import { benchSandbox } from './_bench-sandbox';
import { median } from './_stats';

const ROUNDS = Number(process.argv[2] ?? 30);
const cmd = process.env.CMD ?? 'date +%N > out.txt';
const sb = await benchSandbox('berth-bench-exectl-');
const { docker, host, spec } = sb;
let marks: Array<[string, number]> = [];
const mark = (n: string) => marks.push([n, performance.now()]);
const C = (Dockerode as unknown as { Container: { prototype: Record<string, (...a: unknown[]) => unknown> } }).Container.prototype;
const E = (Dockerode as unknown as { Exec: { prototype: Record<string, (...a: unknown[]) => unknown> } }).Exec.prototype;
for (const [proto, name, label] of [[C, 'exec', 'create'], [E, 'start', 'start'], [E, 'inspect', 'exec.inspect'], [C, 'inspect', 'ctr.inspect']] as const) {
  const orig = proto[name]!;
  proto[name] = function (this: unknown, ...a: unknown[]) {
    mark(`${label}>`);
    const r = orig.apply(this, a) as Promise<unknown>;
    return r.then((v) => {
      mark(`${label}<`);
      if (label === 'start') {
        const s = v as NodeJS.ReadableStream;
        let first = true;
        s.on('data', () => { if (first) { first = false; mark('data'); } });
        s.on('end', () => mark('end'));
      }
      return v;
    });
  };
}
const EP = EngineEvents.prototype as unknown as Record<string, (...a: unknown[]) => unknown>;
const onData = EP.onData!;
EP.onData = function (this: unknown, chunk: unknown) {
  if (String(chunk).includes('exec_die')) mark('exec_die');
  return onData.call(this, chunk);
};
const drain = (s: NodeJS.ReadableStream) => new Promise<void>((res) => { s.on('data', () => undefined); s.on('end', res); s.on('close', res); });
try {
  const lease = await host.lease(spec, { sessionId: 'bench', autoHeartbeat: false });
  const c = docker.getContainer(lease.containerId);
  const raw = async () => {
    const ex = await c.exec({ Cmd: ['sh', '-c', cmd], User: '1000:1000', WorkingDir: '/workspace', AttachStdout: true, AttachStderr: true, Tty: false });
    await drain((await ex.start({ hijack: true, stdin: false })) as NodeJS.ReadableStream);
    if ((await ex.inspect()).ExitCode !== 0) throw new Error('raw failed');
  };
  const ours = async () => { if ((await lease.exec(['sh', '-c', cmd])).exitCode !== 0) throw new Error('lease.exec failed'); };
  const kinds = { raw, ours } as Record<string, () => Promise<void>>;
  const gaps: Record<string, Record<string, number[]>> = {};
  const totals: Record<string, number[]> = {};
  for (const f of Object.values(kinds)) await f();
  await new Promise((r) => setTimeout(r, 200));
  for (let i = 0; i < ROUNDS; i++) {
    const names = Object.keys(kinds);
    for (const k of i % 2 ? names.reverse() : names) {
      marks = [];
      const t0 = performance.now();
      await kinds[k]!();
      const t1 = performance.now();
      (totals[k] ??= []).push(t1 - t0);
      let prev = t0;
      const g = (gaps[k] ??= {});
      const seen = new Map<string, number>();
      for (const [n, t] of marks) {
        const key = `${n}#${(seen.get(n) ?? 0) + 1}`;
        seen.set(n, (seen.get(n) ?? 0) + 1);
        (g[key] ??= []).push(t - prev);
        prev = t;
      }
      (g['return'] ??= []).push(t1 - prev);
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  for (const k of Object.keys(kinds)) {
    console.log(`${k}: p50 ${median(totals[k]!).toFixed(2)} ms`);
    for (const [n, v] of Object.entries(gaps[k]!)) console.log(`   ${n.padEnd(18)} +${median(v).toFixed(2)} ms (n=${v.length})`);
  }
  await lease.release();
} finally {
  await sb.close();
}
