import type Dockerode from 'dockerode';
import { engineError } from './engine-errors';

/** What the engine can give one container: its CPUs, memory and whether it enforces pids limits. */
export async function engineCapacity(docker: Dockerode): Promise<{ cpus: number; memoryBytes: number; pidsLimit: boolean }> {
  try {
    const info = (await docker.info()) as { NCPU?: number; MemTotal?: number; PidsLimit?: boolean };
    return { cpus: info.NCPU ?? Infinity, memoryBytes: info.MemTotal ?? Infinity, pidsLimit: info.PidsLimit !== false };
  } catch (err) {
    throw engineError('read engine info', err);
  }
}
