import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { DocumentTypes, HandlerRegistry, Kernel, submit, type Decision } from '../../host/kernel';
import { BerthError } from '../../host/errors';
import { systemClock } from '../../host/support';
import { storeWithKernels } from '../support/store-kernels';
import { STORE_KINDS } from '../support/store-kinds';

// The images of a snapshot are committed before its record: a decision that never commits leaves
// images that no record names. The kernel says which snapshot ids it dropped, so the host removes
// them at once (seen: a drive stopped by its AbortSignal while a step's snapshot was taken left
// `berth-snapshot:snap_…` behind until the next gc).
const snapshot = (id: string) => ({ id, leaseId: 'lease_test', imageId: `sha256:${id}`, workspaceDigest: 'sha256:ws', sizeBytes: 1, checkpoint: 'step:0:one', parentId: null });

describe.each(STORE_KINDS)('snapshots of a decision that never commits (%s store)', (kind) => {
  const t = storeWithKernels(kind);

  /** A kernel whose one task kind returns `decide()`, and the snapshot ids it was told to discard. */
  async function kernelWith(decide: (signal: AbortSignal) => Promise<Decision>) {
    const { store } = await t.store();
    const discarded: string[][] = [];
    let entered!: () => void;
    const inPhase = new Promise<void>((r) => (entered = r));
    const registry = new HandlerRegistry();
    registry.register({
      kind: 'snapshotting',
      version: 1,
      initialPhase: 'start',
      phases: {
        start: async (ctx) => {
          entered();
          return decide(ctx.signal);
        },
      },
    });
    const kernel = new Kernel({ store, registry, documents: new DocumentTypes(), clock: systemClock, logger: pino({ level: 'silent' }), hostId: 'dropped-host', pollMs: 50, discardSnapshots: async (ids) => void discarded.push(ids) });
    t.kernels.push(kernel);
    return { store, registry, kernel, discarded, inPhase };
  }

  it('are discarded when the host stops while the phase that took them is finishing, and no record of them is written', async () => {
    const k = await kernelWith(
      (signal) =>
        // The phase took its snapshot and finishes its decision after the host began stopping.
        new Promise((resolve) => signal.addEventListener('abort', () => resolve({ type: 'complete', result: {}, writes: { snapshots: [snapshot('snap_dropped')] } }), { once: true })),
    );
    await k.kernel.start();
    const { run } = await submit({ kernel: k.kernel, store: k.store, registry: k.registry }, { requestId: 'dropped', runKind: 'test', root: { kind: 'snapshotting', input: {} } });
    await k.inPhase;
    await k.kernel.stop();
    expect(k.discarded).toEqual([['snap_dropped']]);
    expect(await k.store.getSnapshot('snap_dropped')).toBeUndefined();
    expect((await k.store.getRun(run.id))!.state).toBe('running');
  });

  it('are kept when the decision commits: the host is never told to discard a recorded snapshot', async () => {
    const k = await kernelWith(async () => ({ type: 'complete', result: {}, writes: { snapshots: [snapshot('snap_kept')] } }));
    await k.kernel.start();
    const { run } = await submit({ kernel: k.kernel, store: k.store, registry: k.registry }, { requestId: 'kept', runKind: 'test', root: { kind: 'snapshotting', input: {} } });
    expect((await k.kernel.waitForRun(run.id)).state).toBe('completed');
    await k.kernel.stop();
    expect(k.discarded).toEqual([]);
    expect((await k.store.getSnapshot('snap_kept'))?.imageId).toBe('sha256:snap_kept');
  });

  it('tell the phase that its decision did not commit when it threw after taking something, and that it did once its retry committed', async () => {
    // What a resumed phase verified of the sandbox is taken once and must reach the record: a phase
    // that throws after taking it gives it back on `false` (host/run-sandbox takeEntriesFor).
    const { store } = await t.store();
    const settled: boolean[] = [];
    const registry = new HandlerRegistry();
    registry.register({
      kind: 'throws-once-typed',
      version: 1,
      initialPhase: 'start',
      phases: {
        start: async (ctx) => {
          ctx.onSettled((committed) => settled.push(committed));
          if (ctx.task.attempts === 0) throw new BerthError('engine_error', 'injected engine 5xx', { retryable: true });
          return { type: 'complete', result: {} };
        },
      },
      maxRetries: 2,
    });
    const kernel = new Kernel({ store, registry, documents: new DocumentTypes(), clock: systemClock, logger: pino({ level: 'silent' }), hostId: 'settled-host', pollMs: 50 });
    t.kernels.push(kernel);
    await kernel.start();
    const { run } = await submit({ kernel, store, registry }, { requestId: 'settled', runKind: 'test', root: { kind: 'throws-once-typed', input: {} } });
    expect((await kernel.waitForRun(run.id)).state).toBe('completed');
    await kernel.stop();
    expect(settled).toEqual([false, true]);
  });
});
