import type { Logger } from 'pino';

/**
 * Runs `fn` and logs how long it took at debug level as `{ phase, ms }` with the message
 * `timing`: the profiling hook the plan benchmark reads (BERTH_LOG_LEVEL=debug) to say where a
 * run's time goes. Costs one clock read either side when debug is off.
 */
export async function timed<T>(logger: Logger, phase: string, fn: () => Promise<T>, fields: Record<string, unknown> = {}): Promise<T> {
  const t0 = performance.now();
  try {
    return await fn();
  } finally {
    if (logger.isLevelEnabled('debug')) logger.debug({ ...fields, phase, ms: Math.round((performance.now() - t0) * 10) / 10 }, 'timing');
  }
}
