/** Shared by the kernel and fleet suites (files starting with `_` are not suites). */
import { stepperRegistry } from '../test/support/stepper-kind';
import pino from 'pino';
import { DocumentTypes, Kernel, submit } from '../host/kernel';
import type { Store } from '../host/store';
import { systemClock } from '../host/support';

/**
 * Drives one run of `steps` durable phase transitions through the whole kernel on `store` (closed
 * afterwards): steps per second, and each commit's time.
 */
export async function kernelSteps(store: Store, steps: number): Promise<{ perSecond: number; commitMs: number[] }> {
  const commitMs: number[] = [];
  const timed: Store = Object.assign(Object.create(store) as Store, {
    commit: async (input: Parameters<Store['commit']>[0]) => {
      const t0 = performance.now();
      const r = await store.commit(input);
      commitMs.push(performance.now() - t0);
      return r;
    },
  });
  const registry = stepperRegistry(steps);

  const kernel = new Kernel({ store: timed, registry, documents: new DocumentTypes(), clock: systemClock, logger: pino({ level: 'silent' }), hostId: 'bench', pollMs: 60_000 });
  await kernel.start();
  const t0 = performance.now();
  const { run } = await submit({ store: timed, kernel, registry }, { requestId: 'bench', runKind: 'bench', root: { kind: 'stepper', input: {} } });
  await kernel.waitForRun(run.id);
  const seconds = (performance.now() - t0) / 1000;
  await kernel.stop();
  await store.close();
  return { perSecond: steps / seconds, commitMs };
}

/**
 * `runs` runs of `stepsEach` durable transitions each, submitted together to one kernel that
 * drives them all at once (concurrency = runs): total steps per second. On SQLite the runs'
 * transitions that end in the same turn share one fsync (host/store/sqlite/shared-sync.ts); each
 * is still its own transaction with its own answer.
 */
export async function concurrentKernelSteps(store: Store, runs: number, stepsEach: number): Promise<number> {
  const registry = stepperRegistry(stepsEach);

  const kernel = new Kernel({ store, registry, documents: new DocumentTypes(), clock: systemClock, logger: pino({ level: 'silent' }), hostId: 'bench', pollMs: 60_000, concurrency: runs });
  await kernel.start();
  const t0 = performance.now();
  const submitted = await Promise.all(Array.from({ length: runs }, (_, k) => submit({ store, kernel, registry }, { requestId: `bench-${k}`, runKind: 'bench', root: { kind: 'stepper', input: {} } })));
  await Promise.all(submitted.map(({ run }) => kernel.waitForRun(run.id)));
  const seconds = (performance.now() - t0) / 1000;
  await kernel.stop();
  await store.close();
  return (runs * stepsEach) / seconds;
}
