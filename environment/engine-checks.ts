import { BerthError } from '../host/errors';
import type { ManifestIssue } from './issues';
import type { Environment } from './schema';

/** What the engine can give a container, as its `info` reports it. */
export interface EngineCapacity {
  cpus: number;
  memoryBytes: number;
  /** The engine can enforce a pids limit (cgroup pids controller). */
  pidsLimit: boolean;
}

const MIB = 1024 * 1024;

/**
 * Refuses resource maxima the engine cannot give, before any sandbox is made: the engine's own
 * errors for these ("range of CPUs is from 0.01 to 2.00") come late and name no manifest field.
 * Checked with the engine's `info` where a run or validation has an engine at hand.
 */
export function checkEngineCapacity(env: Environment, engine: EngineCapacity): void {
  const r = env.resources;
  const issues: ManifestIssue[] = [];
  if (r.cpus > engine.cpus) {
    issues.push({ path: 'resources.cpus', expected: `at most ${engine.cpus} (the engine's CPUs)`, found: String(r.cpus), message: `resources.cpus: ${r.cpus} CPUs asked, the engine has ${engine.cpus}` });
  }
  if (r.memoryMb * MIB > engine.memoryBytes) {
    const has = Math.floor(engine.memoryBytes / MIB);
    issues.push({ path: 'resources.memoryMb', expected: `at most ${has} (the engine's memory in MB)`, found: String(r.memoryMb), message: `resources.memoryMb: ${r.memoryMb} MB asked, the engine has ${has} MB` });
  }
  if (!engine.pidsLimit) {
    issues.push({ path: 'resources.pids', expected: 'an engine that enforces pids limits', found: String(r.pids), message: `resources.pids: the engine cannot enforce a pids limit (no cgroup pids controller), so ${r.pids} would not hold` });
  }
  if (issues.length === 0) return;
  throw new BerthError('manifest_unsupported', `the engine cannot give this environment's resources: ${issues.map((i) => i.message).join('; ')}`, { details: { issues } });
}
