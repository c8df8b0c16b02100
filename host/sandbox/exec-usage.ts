import type Dockerode from 'dockerode';
import type { Logger } from 'pino';
import { cgroupCounters } from './cgroup-counters';

/** What one measured exec cost the sandbox, from the container's cgroup counters. */
export interface ExecUsage {
  /** CPU time the container's cgroup used between the exec's start and end (all its processes). */
  cpuUsec: number;
  /** Memory in use, integrated over the exec's wall time (bytes × milliseconds). */
  memoryByteMs: number;
}

/** Longest wait for one reading. */
const READ_TIMEOUT_MS = 5000;

interface Reading {
  at: number;
  cpuNs: number;
  memoryBytes: number;
}

type StatsBody = {
  cpu_stats?: { cpu_usage?: { total_usage?: number } };
  memory_stats?: { usage?: number; stats?: Record<string, number> };
};

/**
 * One reading of the container's cgroup counters: from this machine's cgroup files when they can
 * be read here, else through the engine (`GET /containers/ID/stats`,
 * one shot, no second sample): the engine reads cgroup v1 `cpuacct.usage` or v2 `cpu.stat
 * usage_usec` alike and reports nanoseconds, so this works on either hierarchy and without access
 * to the host's cgroup filesystem. Memory is `usage` less inactive file cache, as `docker stats`
 * shows it. Null when the engine gave no counters (container gone, engine busy).
 */
async function readCounters(container: Dockerode.Container): Promise<Reading | null> {
  const local = await cgroupCounters(container);
  if (local) return { at: performance.now(), ...local };
  try {
    // Bounded: a reading is worth less than the command's result, which must not wait on a stuck engine.
    const body = (await container.stats({ stream: false, 'one-shot': true, abortSignal: AbortSignal.timeout(READ_TIMEOUT_MS) } as unknown as { stream: false })) as StatsBody;
    const cpuNs = body.cpu_stats?.cpu_usage?.total_usage;
    const usage = body.memory_stats?.usage;
    if (typeof cpuNs !== 'number' || typeof usage !== 'number') return null;
    const s = body.memory_stats?.stats ?? {};
    const inactive = s.total_inactive_file ?? s.inactive_file ?? 0;
    return { at: performance.now(), cpuNs, memoryBytes: Math.max(0, usage - (inactive < usage ? inactive : 0)) };
  } catch {
    return null;
  }
}

/** The container's cumulative CPU time (all its processes since it started), in microseconds; undefined when no counter can be read. */
export async function readCpuUsec(container: Dockerode.Container): Promise<number | undefined> {
  const r = await readCounters(container);
  return r ? Math.round(r.cpuNs / 1000) : undefined;
}

/** Memory is sampled this often while a measured exec runs (one engine call each). */
const SAMPLE_MS = 1000;

/**
 * Measures one exec: a reading before it starts, one per second while it runs (memory), one after
 * it ends. CPU is the difference of the cumulative counter, so it is exact for the container
 * whatever the sampling; memory is the trapezoid integral of the samples. Concurrent execs in
 * one container each see the other's use (the cgroup is the container's). Best effort: a missing
 * reading leaves the usage undefined rather than failing the command.
 */
export async function startUsageMeter(container: Dockerode.Container, logger: Logger): Promise<{ stop(): Promise<ExecUsage | undefined>; cancel(): void }> {
  const first = await readCounters(container);
  const samples: Reading[] = first ? [first] : [];
  let sampling: Promise<void> | undefined;
  const timer = setInterval(() => {
    if (sampling) return;
    sampling = readCounters(container).then((r) => {
      if (r) samples.push(r);
      sampling = undefined;
    });
  }, SAMPLE_MS);
  timer.unref();
  return {
    cancel: () => clearInterval(timer),
    async stop() {
      clearInterval(timer);
      await sampling;
      const last = await readCounters(container);
      if (!first || !last) {
        logger.debug('no cgroup counters for this exec: its usage is not recorded');
        return undefined;
      }
      samples.push(last);
      let memoryByteMs = 0;
      for (let i = 1; i < samples.length; i++) {
        const a = samples[i - 1]!;
        const b = samples[i]!;
        memoryByteMs += ((a.memoryBytes + b.memoryBytes) / 2) * (b.at - a.at);
      }
      return { cpuUsec: Math.max(0, Math.round((last.cpuNs - first.cpuNs) / 1000)), memoryByteMs: Math.round(memoryByteMs) };
    },
  };
}
