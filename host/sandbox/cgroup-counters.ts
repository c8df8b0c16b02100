import { readFileSync } from 'node:fs';
import type Dockerode from 'dockerode';

/** The container's cgroup counter files on this machine, v1 (cpuacct, memory) or v2 (unified). */
interface CounterFiles {
  cpu: string;
  /** v1 `cpuacct.usage` counts nanoseconds; v2 `cpu.stat` has `usage_usec`. */
  v2: boolean;
  memoryUsage: string;
  memoryStat: string;
  /** v1 `memory.oom_control` or v2 `memory.events`: both have an `oom_kill N` line. */
  memoryEvents: string;
}

/** CPU nanoseconds and memory in use (less inactive file cache, as `docker stats` shows it). */
export interface CounterReading {
  cpuNs: number;
  memoryBytes: number;
}

// A container's cgroup never moves while it lives: found once per container. Bounded.
const cache = new Map<string, CounterFiles | null>();

function counterFiles(pid: number, containerId: string): CounterFiles | null {
  // Only a path that names the container: in another cgroup namespace the lines are relative (`/`).
  const lines = readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n').filter((l) => l.includes(containerId));
  const v1 = (controller: string) => lines.map((l) => l.split(':')).find((f) => f[1]?.split(',').includes(controller))?.[2];
  const cpuacct = v1('cpuacct');
  const memory = v1('memory');
  if (cpuacct && memory) {
    return { cpu: `/sys/fs/cgroup/cpuacct${cpuacct}/cpuacct.usage`, v2: false, memoryUsage: `/sys/fs/cgroup/memory${memory}/memory.usage_in_bytes`, memoryStat: `/sys/fs/cgroup/memory${memory}/memory.stat`, memoryEvents: `/sys/fs/cgroup/memory${memory}/memory.oom_control` };
  }
  const unified = lines.find((l) => l.startsWith('0::'))?.slice(3);
  if (unified) return { cpu: `/sys/fs/cgroup${unified}/cpu.stat`, v2: true, memoryUsage: `/sys/fs/cgroup${unified}/memory.current`, memoryStat: `/sys/fs/cgroup${unified}/memory.stat`, memoryEvents: `/sys/fs/cgroup${unified}/memory.events` };
  return null;
}

function read(f: CounterFiles): CounterReading {
  const cpuText = readFileSync(f.cpu, 'utf8');
  const cpuNs = f.v2 ? Number(/^usage_usec (\d+)/m.exec(cpuText)?.[1]) * 1000 : Number(cpuText.trim());
  const usage = Number(readFileSync(f.memoryUsage, 'utf8').trim());
  const stat = readFileSync(f.memoryStat, 'utf8');
  const inactive = Number((/^total_inactive_file (\d+)/m.exec(stat) ?? /^inactive_file (\d+)/m.exec(stat))?.[1] ?? 0);
  if (!Number.isFinite(cpuNs) || !Number.isFinite(usage)) throw new Error('unreadable cgroup counters');
  return { cpuNs, memoryBytes: Math.max(0, usage - (inactive < usage ? inactive : 0)) };
}

/**
 * The container's cgroup counters read from this machine's cgroup filesystem (a local engine, this
 * process as root in the host's cgroup namespace), with no engine call: the engine's stats
 * endpoint answers only on its collector's one-second tick, which cost a measured exec ~1 s
 * before it started and ~1 s after it ended (plan bench, session 5). `undefined` when the files
 * cannot be read here; the caller then asks the engine.
 */
export async function cgroupCounters(container: Dockerode.Container): Promise<CounterReading | undefined> {
  const files = await filesOf(container);
  if (!files) return undefined;
  try {
    return read(files);
  } catch {
    // Gone with its container (or moved): the engine's answer, or none, from now on.
    cache.set(container.id, null);
    return undefined;
  }
}

/**
 * True when the container runs on this machine's kernel: its cgroup is in this machine's /proc, so
 * its processes' start times count this machine's uptime. Cached per container like the counters.
 */
export async function onThisKernel(container: Dockerode.Container): Promise<boolean> {
  return (await filesOf(container)) !== null;
}

/**
 * The kernel's cumulative count of OOM kills in the container's memory cgroup, read from this
 * machine's cgroup filesystem; `undefined` when it cannot be read here (a remote engine, an old
 * kernel). The kernel counts the kill before the victim dies, so a reading taken after an exec
 * ended already holds every kill of that exec: unlike the engine's `oom` event, which may come
 * after the exec's end (late under load) and is missed for a command that itself exits 0.
 */
export async function cgroupOomKills(container: Dockerode.Container): Promise<number | undefined> {
  const files = await filesOf(container);
  if (!files) return undefined;
  try {
    const m = /^oom_kill (\d+)$/m.exec(readFileSync(files.memoryEvents, 'utf8'));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

async function filesOf(container: Dockerode.Container): Promise<CounterFiles | null> {
  let files = cache.get(container.id);
  if (files === undefined) {
    try {
      const pid = ((await container.inspect()) as { State?: { Pid?: number } }).State?.Pid;
      files = pid ? counterFiles(pid, container.id) : null;
      if (files) read(files);
    } catch {
      files = null;
    }
    if (cache.size >= 512) cache.delete(cache.keys().next().value!);
    cache.set(container.id, files);
  }
  return files;
}
