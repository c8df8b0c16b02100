/**
 * exec A/B (not a suite): in one sandbox, interleaved, a raw exec of `date +%N > out.txt` (without
 * and with stdin attached), the same command under Berth's wrapper script by raw dockerode calls
 * (stdin line, no host extras; with and without its sweep), and `lease.exec` with and without
 * `measure`. Wall times: at load 15+ they spread more than the differences; the wrapper's own cost
 * is clearer in CPU (bench/RESULTS.md, tool-egress). `npx tsx bench/_exec-ab.ts [ROUNDS]`
 */
import { WRAPPER_NAME, WRAPPER_SCRIPT } from '../host/sandbox/exec-scripts';
import { benchSandbox } from './_bench-sandbox';
import { median } from './_stats';

const ROUNDS = Number(process.argv[2] ?? 30);
const sb = await benchSandbox('berth-bench-execab-');
const { docker, host, spec } = sb;
const cmd = 'date +%N > out.txt';
const drain = (s: NodeJS.ReadableStream) => new Promise<void>((res) => { s.on('data', () => undefined); s.on('end', res); s.on('close', res); });
try {
  const lease = await host.lease(spec, { sessionId: 'bench', autoHeartbeat: false });
  const c = docker.getContainer(lease.containerId);
  const raw = async () => {
    const ex = await c.exec({ Cmd: ['sh', '-c', cmd], User: '1000:1000', WorkingDir: '/workspace', AttachStdout: true, AttachStderr: true, Tty: false });
    await drain((await ex.start({ hijack: true, stdin: false })) as NodeJS.ReadableStream);
    if ((await ex.inspect()).ExitCode !== 0) throw new Error('raw failed');
  };
  const rawStdin = async () => {
    const ex = await c.exec({ Cmd: ['sh', '-c', cmd], User: '1000:1000', WorkingDir: '/workspace', AttachStdin: true, AttachStdout: true, AttachStderr: true, Tty: false });
    const s = (await ex.start({ hijack: true, stdin: true })) as NodeJS.ReadWriteStream;
    s.end();
    await drain(s);
    if ((await ex.inspect()).ExitCode !== 0) throw new Error('raw failed');
  };
  const wrapper = (keep: string) => async () => {
    const ex = await c.exec({ Cmd: ['/bin/sh', '-c', WRAPPER_SCRIPT, WRAPPER_NAME, keep, '', '/bin/sh', '-c', cmd], User: '1000:1000', WorkingDir: '/workspace', AttachStdin: true, AttachStdout: true, AttachStderr: true, Tty: false });
    const s = (await ex.start({ hijack: true, stdin: true })) as NodeJS.ReadWriteStream;
    s.write(`${ex.id} 0 \n`);
    s.end();
    await drain(s);
    if ((await ex.inspect()).ExitCode !== 0) throw new Error('wrapped failed');
  };
  const wrapped = wrapper('0');
  const wrappedNoSweep = wrapper('1');
  const ours = async () => { if ((await lease.exec(['sh', '-c', cmd])).exitCode !== 0) throw new Error('lease.exec failed'); };
  const measured = async () => { if ((await lease.exec(['sh', '-c', cmd], { measure: true })).exitCode !== 0) throw new Error('lease.exec failed'); };
  const kinds = { raw, rawStdin, wrappedNoSweep, wrapped, ours, measured } as Record<string, () => Promise<void>>;
  const t: Record<string, number[]> = {};
  for (const f of Object.values(kinds)) await f();
  for (let i = 0; i < ROUNDS; i++) {
    const names = Object.keys(kinds);
    const order = i % 2 ? names.reverse() : names;
    for (const k of order) { const t0 = performance.now(); await kinds[k]!(); (t[k] ??= []).push(performance.now() - t0); }
  }
  for (const [k, v] of Object.entries(t)) console.log(`${k.padEnd(10)} p50 ${median(v).toFixed(1)} ms  vs raw ${(median(v.map((x, i) => x / t.raw![i]!))).toFixed(2)}x`);
  await lease.release();
} finally {
  await sb.close();
}
