import { afterEach } from 'vitest';
import type { Kernel } from '../../host/kernel';
import { tempStoreOf, type StoreKind } from './store-kinds';

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
  return {
    kernels,
    async store() {
      return (t = await tempStoreOf(kind));
    },
  };
}
