/**
 * Wrapper parts (not a suite): the container CPU (cgroup) and wall time of one exec of `true` under
 * the wrapper with one part taken out at a time, in one sandbox, interleaved; the raw `sh -c true`
 * (stdin attached) beside them. Parts: the command's own shell (`"$@"` -> `eval` in a subshell),
 * the `pst $$` read, the OOM score write, the registry entry, the end-of-command children read;
 * and a minimal wrapper (read the line, run the command), alone and padded to the wrapper's length.
 * Measures only: none of these variants is safe to ship (see exec-scripts.ts).
 * `npx tsx bench/_wrapper-parts.ts [ROUNDS]`
 */
import { COMMAND_OOM_SCORE_ADJ, WRAPPER_NAME, WRAPPER_SCRIPT } from '../host/sandbox/exec-scripts';
import { benchSandbox } from './_bench-sandbox';
import { containerRounds, mean } from './_container-rounds';
import { median } from './_stats';

const ROUNDS = Number(process.argv[2] ?? 30);
const sb = await benchSandbox('berth-bench-wparts-');
const { docker, host, spec } = sb;
const drain = (s: NodeJS.ReadableStream) => new Promise<void>((res) => { s.on('data', () => undefined); s.on('end', res); s.on('close', res); });
const cut = (from: string, to: string) => {
  if (!WRAPPER_SCRIPT.includes(from)) throw new Error(`no "${from}" in the wrapper`);
  return WRAPPER_SCRIPT.replace(from, to);
};
const scripts: Record<string, string | undefined> = {
  raw: undefined,
  wrapper: WRAPPER_SCRIPT,
  'no own shell': cut('if [ "$b_in" = 1 ]; then "$@"; else "$@" </dev/null; fi', '(eval "$3") </dev/null'),
  'no pst': cut('pst $$ && echo', 'ps_start=0; echo'),
  'no oom write': cut(`echo ${COMMAND_OOM_SCORE_ADJ} 2>/dev/null >/proc/self/oom_score_adj`, ':'),
  'no registry': cut('*) : 2>/dev/null >"/dev/berth-execs/$b_eid" ;;', '*) ;;'),
  minimal: 'read -r b_eid b_in b_forget; shift 2; "$@"',
  'minimal, long': `${'#'.repeat(WRAPPER_SCRIPT.length)}\nread -r b_eid b_in b_forget; shift 2; "$@"`,
  'minimal, long env': 'PAD',
  'no end read': cut('b_kids=; read -r b_kids 2>/dev/null </proc/1/task/1/children', 'b_kids=1'),
};
try {
  const lease = await host.lease(spec, { sessionId: 'bench', autoHeartbeat: false });
  const c = docker.getContainer(lease.containerId);
  const run = (script0: string | undefined) => async () => {
    let script = script0;
    const padEnv = script === 'PAD';
    if (padEnv) script = 'read -r b_eid b_in b_forget; shift 2; "$@"';
    const Cmd = script ? ['/bin/sh', '-c', script, WRAPPER_NAME, '0', '', '/bin/sh', '-c', 'true'] : ['sh', '-c', 'true'];
    const ex = await c.exec({ Cmd, ...(padEnv ? { Env: [`PAD=${'#'.repeat(WRAPPER_SCRIPT.length)}`] } : {}), User: '1000:1000', WorkingDir: '/workspace', AttachStdin: true, AttachStdout: true, AttachStderr: true, Tty: false });
    const s = (await ex.start({ hijack: true, stdin: true })) as NodeJS.ReadWriteStream;
    if (script) s.write(`${ex.id} 0 \n`);
    s.end();
    await drain(s);
    if ((await ex.inspect()).ExitCode !== 0) throw new Error('failed');
  };
  const kinds = Object.fromEntries(Object.entries(scripts).map(([k, s]) => [k, run(s)]));
  const { wall: t, cpu } = await containerRounds(c, kinds, ROUNDS);
  for (const [k, v] of Object.entries(t)) console.log(`${k.padEnd(13)} wall p50 ${median(v).toFixed(1)} ms (vs wrapper ${median(v.map((x, i) => x / t.wrapper![i]!)).toFixed(3)}x)   container CPU mean ${mean(cpu[k]!).toFixed(2)} ms`);
  await lease.release();
} finally {
  await sb.close();
}
