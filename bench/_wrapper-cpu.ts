/**
 * wrapper CPU (not a suite): the container CPU one command costs under Berth's exec wrapper, against
 * a bare `sh -c` and against the wrapper with its process-list sweep forced (the wrapper before
 * tool-egress session 10), read from the container's cgroup counter (CPU time, which a loaded
 * machine stretches far less than wall time). Each variant runs N times in a loop inside one idle
 * container, fed the stdin line the host writes. `npx tsx bench/_wrapper-cpu.ts [N]`
 */
import { WRAPPER_NAME, WRAPPER_SCRIPT } from '../host/sandbox/exec-scripts';
import { cgroupCounters } from '../host/sandbox/cgroup-counters';
import { requireEngine, requireTinyImage } from '../test/support/docker-engine';
import { timedExec } from './egress';

const N = Number(process.argv[2] ?? 300);
const docker = await requireEngine();
await requireTinyImage(docker);
const FAST = /if \[ "\$b_keep" != 1 \]; then\n {2}b_kids=[^\n]*\n[^\n]*\nfi/;
if (!FAST.test(WRAPPER_SCRIPT)) throw new Error('the wrapper has no sweep fast path to compare');
const swept = WRAPPER_SCRIPT.replace(FAST, 'if [ "$b_keep" != 1 ]; then pl_mode=sweep pl_spare=; pl_kill; fi');
const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
const id = '0'.repeat(64);
const loop = (body: string) => `cd /workspace; i=0; while [ $i -lt ${N} ]; do echo "${id} 0 ${id}" | ${body} >/dev/null; i=$((i+1)); done`;
const variants: Record<string, string> = {
  bare: loop(`sh -c 'date +%N > out.txt'`),
  wrapper: loop(`sh -c ${q(WRAPPER_SCRIPT)} ${WRAPPER_NAME} 0 '' /bin/sh -c 'date +%N > out.txt'`),
  'wrapper, sweep forced': loop(`sh -c ${q(swept)} ${WRAPPER_NAME} 0 '' /bin/sh -c 'date +%N > out.txt'`),
};
const c = await docker.createContainer({ Image: 'berth/tiny:latest', User: '1000:1000', Cmd: ['sh', '-c', 'while :; do sleep 1000; done'], Labels: { 'berth.host': `bench-wrapper-${process.pid}` }, HostConfig: { Init: true } });
try {
  await c.start();
  const root = await c.exec({ Cmd: ['sh', '-c', 'mkdir -p -m 0733 /dev/berth-execs /workspace && chown 1000:1000 /workspace'], User: '0:0', AttachStdout: true, AttachStderr: true });
  const setup = await root.start({ hijack: true, stdin: false });
  setup.resume();
  await new Promise((r) => setup.on('end', r));
  const cpu = async () => (await cgroupCounters(c))?.cpuNs ?? NaN;
  for (let round = 1; round <= 3; round++) {
    const parts: string[] = [];
    for (const [name, script] of Object.entries(variants)) {
      const before = await cpu();
      await timedExec(c, script);
      parts.push(`${name} ${(((await cpu()) - before) / N / 1e6).toFixed(2)} ms`);
    }
    console.log(`round ${round}: CPU per command: ${parts.join(', ')}`);
  }
} finally {
  await c.remove({ force: true });
}
