/** What the soak probes (bench/_soak-*.ts, run with node --expose-gc) read of this process after a full collection. */
import { readdirSync } from 'node:fs';

const gc = (globalThis as { gc?: () => void }).gc ?? (() => {});

/** Heap and RSS (MB), open file descriptors, active handles and resources, once garbage is collected (twice, a pause between). */
export async function processFigures(pauseMs = 100): Promise<{ heapMB: number; rssMB: number; fds: number; handles: number; resources: number }> {
  gc();
  await new Promise((r) => setTimeout(r, pauseMs));
  gc();
  const m = process.memoryUsage();
  return {
    heapMB: +(m.heapUsed / 1e6).toFixed(2),
    rssMB: +(m.rss / 1e6).toFixed(1),
    fds: readdirSync('/proc/self/fd').length,
    handles: (process as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles().length,
    resources: process.getActiveResourcesInfo().length,
  };
}
