import { afterAll, afterEach } from 'vitest';
import type { Kernel } from '../../host/kernel';
import { stopSharedPostgres, tempStoreOf, type StoreKind } from './store-kinds';

/**
 * A fresh store of `kind` per test and the kernels the test starts on it, stopped and removed
 * after each test. Call inside a `describe`; `store()` opens the test's store, `kernels` takes
 * what it must stop.
 */
export function storeWithKernels(kind: StoreKind) {
  let t: Awaited<ReturnType<typeof tempStoreOf>> | undefined;
  const kernels: Kernel[] = [];
  afterEach(async () => {
    for (const k of kernels.splice(0)) await k.stop();
    await t?.cleanup();
    t = undefined;
  });
  // The cluster is a daemon of its own (pg_ctl): the test process's exit does not stop it
  // (kernel-dropped-snapshots left one running after every suite).
  afterAll(stopSharedPostgres);
  return {
    kernels,
    async store() {
      return (t = await tempStoreOf(kind));
    },
  };
}
