/**
 * Wrapper cost split (not a suite): in one sandbox, interleaved, raw `sh -c true`, a nested
 * `sh -c 'sh -c true'`, the wrapper with its stdin line, and the wrapper given that line in argv
 * (no stdin). `npx tsx bench/_wrapper-split.ts [ROUNDS]`
 */
import { WRAPPER_NAME, WRAPPER_SCRIPT } from '../host/sandbox/exec-scripts';
import { benchSandbox } from './_bench-sandbox';
import { median } from './_stats';

const ROUNDS = Number(process.argv[2] ?? 30);
const sb = await benchSandbox('berth-bench-wsplit-');
const { docker, host, spec } = sb;
const drain = (s: NodeJS.ReadableStream) => new Promise<void>((res) => { s.on('data', () => undefined); s.on('end', res); s.on('close', res); });
try {
  const lease = await host.lease(spec, { sessionId: 'bench', autoHeartbeat: false });
  const c = docker.getContainer(lease.containerId);
  const run = (Cmd: string[], line?: string) => async () => {
    const ex = await c.exec({ Cmd, User: '1000:1000', WorkingDir: '/workspace', AttachStdin: line !== undefined, AttachStdout: true, AttachStderr: true, Tty: false });
    const s = (await ex.start({ hijack: true, stdin: line !== undefined })) as NodeJS.ReadWriteStream;
    if (line !== undefined) { s.write(line); s.end(); }
    await drain(s);
    if ((await ex.inspect()).ExitCode !== 0) throw new Error(`failed: ${Cmd.join(' ').slice(0, 60)}`);
  };
  const argvScript = WRAPPER_SCRIPT.replace('read -r b_eid b_in b_forget', 'b_eid=abc b_in=0 b_forget=');
  // The MCP bench's baseline: no user, no working directory, no hijack.
  const plain = async () => {
    const ex = await c.exec({ Cmd: ['sh', '-c', 'true'], AttachStdout: true, AttachStderr: true });
    const s = await ex.start({});
    await drain(s);
    await ex.inspect();
  };
  const kinds: Record<string, () => Promise<void>> = {
    raw: run(['sh', '-c', 'true']),
    plain,
    nested: run(['/bin/sh', '-c', '/bin/sh -c true; exit $?']),
    subshell: run(['/bin/sh', '-c', '(eval "$1"); exit $?', 'x', 'true']),
    wrapStdin: run(['/bin/sh', '-c', WRAPPER_SCRIPT, WRAPPER_NAME, '0', '', '/bin/sh', '-c', 'true'], 'abc 0 \n'),
    wrapArgv: run(['/bin/sh', '-c', argvScript, WRAPPER_NAME, '0', '', '/bin/sh', '-c', 'true']),
    wrapKeep: run(['/bin/sh', '-c', argvScript, WRAPPER_NAME, '1', '', '/bin/sh', '-c', 'true']),
  };
  const t: Record<string, number[]> = {};
  for (const f of Object.values(kinds)) await f();
  for (let i = 0; i < ROUNDS; i++) {
    const names = Object.keys(kinds);
    for (const k of i % 2 ? names.reverse() : names) { const t0 = performance.now(); await kinds[k]!(); (t[k] ??= []).push(performance.now() - t0); }
  }
  for (const [k, v] of Object.entries(t)) console.log(`${k.padEnd(10)} p50 ${median(v).toFixed(1)} ms  vs raw ${median(v.map((x, i) => x / t.raw![i]!)).toFixed(2)}x`);
  await lease.release();
} finally {
  await sb.close();
}
