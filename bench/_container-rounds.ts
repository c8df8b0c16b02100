/** Shared by the exec-wrapper probes (files starting with `_` are not suites). */
import type Dockerode from 'dockerode';
import { cgroupCounters } from '../host/sandbox/cgroup-counters';

/**
 * Each of `kinds` once to warm up, then `rounds` rounds in alternating order (a round's order is
 * the last one's reversed): each call's wall ms, and the container CPU ms its cgroup counted meanwhile.
 */
export async function containerRounds(container: Dockerode.Container, kinds: Record<string, () => Promise<void>>, rounds: number): Promise<{ wall: Record<string, number[]>; cpu: Record<string, number[]> }> {
  const wall: Record<string, number[]> = {};
  const cpu: Record<string, number[]> = {};
  for (const f of Object.values(kinds)) await f();
  for (let i = 0; i < rounds; i++) {
    const names = Object.keys(kinds);
    for (const k of i % 2 ? names.reverse() : names) {
      const c0 = (await cgroupCounters(container))?.cpuNs ?? NaN;
      const t0 = performance.now();
      await kinds[k]!();
      (wall[k] ??= []).push(performance.now() - t0);
      (cpu[k] ??= []).push((((await cgroupCounters(container))?.cpuNs ?? NaN) - c0) / 1e6);
    }
  }
  return { wall, cpu };
}

/** The mean. */
export const mean = (v: number[]) => v.reduce((a, b) => a + b, 0) / v.length;
