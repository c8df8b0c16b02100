/**
 * Wrapper forget cost (not a suite): in one sandbox, interleaved, a raw `sh -c true` with stdin
 * attached, the wrapper as it was (an `rm` of the exec before it, every exec), and the wrapper now
 * (a mark by redirection; the removal of 16 at once every 16th exec). Wall time per exec, and the
 * container's CPU per exec from its cgroup (which load stretches far less).
 * `npx tsx bench/_wrapper-forget.ts [ROUNDS]`
 */
import { WRAPPER_NAME, WRAPPER_SCRIPT } from '../host/sandbox/exec-scripts';
import { benchSandbox } from './_bench-sandbox';
import { containerRounds, mean } from './_container-rounds';
import { median } from './_stats';

const ROUNDS = Number(process.argv[2] ?? 48);
const sb = await benchSandbox('berth-bench-wforget-');
const { docker, host, spec } = sb;
const drain = (s: NodeJS.ReadableStream) => new Promise<void>((res) => { s.on('data', () => undefined); s.on('end', res); s.on('close', res); });
const NEW = /b_rm=\nfor b_f in \$b_forget; do [^\n]*\n\[ -z "\$b_rm" \] \|\| rm -f \$b_rm 2>\/dev\/null/;
if (!NEW.test(WRAPPER_SCRIPT)) throw new Error('the wrapper has no batched forget to compare');
const OLD = WRAPPER_SCRIPT.replace(NEW, 'for b_f in $b_forget; do case $b_f in *[!0-9a-f]*) ;; *) rm -f "/dev/berth-execs/$b_f" 2>/dev/null ;; esac; done');
try {
  const lease = await host.lease(spec, { sessionId: 'bench', autoHeartbeat: false });
  const c = docker.getContainer(lease.containerId);
  const last: Record<string, string[]> = { old: [], now: [] };
  let n = 0;
  const run = (script: string | undefined, kind: 'old' | 'now' | 'raw') => async () => {
    const Cmd = script ? ['/bin/sh', '-c', script, WRAPPER_NAME, '0', '', '/bin/sh', '-c', 'true'] : ['sh', '-c', 'true'];
    const ex = await c.exec({ Cmd, User: '1000:1000', WorkingDir: '/workspace', AttachStdin: true, AttachStdout: true, AttachStderr: true, Tty: false });
    const s = (await ex.start({ hijack: true, stdin: true })) as NodeJS.ReadWriteStream;
    if (kind === 'old') s.write(`${ex.id} 0 ${last.old!.join(' ')}\n`);
    if (kind === 'now') {
      // As ExecActivity hands them out: the exec before marked, 16 marked ones removed every 16th exec.
      const removes = ++n % 16 === 0 ? last.now!.splice(0, 16).map((id) => `-${id}`) : [];
      s.write(`${ex.id} 0 ${last.now!.slice(-1).join(' ')} ${removes.join(' ')}\n`);
    }
    s.end();
    await drain(s);
    if ((await ex.inspect()).ExitCode !== 0) throw new Error(`${kind} failed`);
    if (kind === 'old') last.old = [ex.id];
    if (kind === 'now') last.now!.push(ex.id);
  };
  const kinds: Record<string, () => Promise<void>> = { raw: run(undefined, 'raw'), old: run(OLD, 'old'), now: run(WRAPPER_SCRIPT, 'now') };
  const { wall: t, cpu } = await containerRounds(c, kinds, ROUNDS);
  for (const [k, v] of Object.entries(t)) console.log(`${k.padEnd(4)} wall p50 ${median(v).toFixed(1)} ms (vs old ${median(v.map((x, i) => x / t.old![i]!)).toFixed(3)}x)   container CPU mean ${mean(cpu[k]!).toFixed(2)} ms, p50 ${median(cpu[k]!).toFixed(2)} ms`);
  await lease.release();
} finally {
  await sb.close();
}
