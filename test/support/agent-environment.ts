import { EnvironmentSchema, type Environment } from '../../environment';

/** An environment on berth/tiny for agent tests; `snapshot` picks the snapshot policy, `runBudgetS` the run's command budget. */
export function tinyEnvironment(imageId: string, over: { snapshot?: 'after-each-step' | 'never'; commandTimeoutS?: number; runBudgetS?: number } = {}): Environment & { image: { digest: string } } {
  return EnvironmentSchema.parse({
    kernel: { name: 'berth', version: '0.1.0', compatible: '>=0.1.0 <0.2.0' },
    image: { ref: 'berth/tiny:latest', digest: imageId },
    resources: { memoryMb: 256, commandTimeoutS: over.commandTimeoutS ?? 60, ...(over.runBudgetS ? { runBudgetS: over.runBudgetS } : {}) },
    lease: { ttlS: 900, heartbeatS: 30 },
    snapshot: { policy: over.snapshot ?? 'never' },
  }) as Environment & { image: { digest: string } };
}
