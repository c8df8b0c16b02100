import { afterAll, describe, expect, it } from 'vitest';
import { STORE_KINDS, stopSharedPostgres, freshStores } from '../support/store-kinds';

afterAll(stopSharedPostgres, 60_000);

describe.each(STORE_KINDS)('pending snapshot deltas, on %s', (kind) => {
  const fresh = freshStores(kind);

  it('keeps a delta\'s config and layer bytes exactly, lists it without them, ignores a second put of the same image and forgets it when deleted', async () => {
    const t = await fresh();
    const store = t.store;
    // Every byte value, so a text column or an encoding step would show.
    const layer = Buffer.from(Array.from({ length: 4096 }, (_, i) => i % 256));
    const config = Buffer.from('{"rootfs":{"type":"layers","diff_ids":["sha256:a"]}}');
    await store.putSnapshotDelta({ imageId: 'sha256:one', parentImageId: 'sha256:base', snapshotId: 'snap_1', config, layer, createdAt: 10 });
    await store.putSnapshotDelta({ imageId: 'sha256:one', parentImageId: 'sha256:other', snapshotId: 'snap_x', config: Buffer.from('x'), layer: Buffer.from('y'), createdAt: 11 });
    await store.putSnapshotDelta({ imageId: 'sha256:two', parentImageId: 'sha256:one', snapshotId: 'snap_2', config, layer: Buffer.alloc(0), createdAt: 12 });
    const got = await store.getSnapshotDelta('sha256:one');
    expect(got && { ...got, config: got.config.toString(), layer: Buffer.compare(got.layer, layer) }).toEqual({ imageId: 'sha256:one', parentImageId: 'sha256:base', snapshotId: 'snap_1', config: config.toString(), layer: 0, createdAt: 10 });
    expect(await store.listSnapshotDeltas()).toEqual([
      { imageId: 'sha256:one', parentImageId: 'sha256:base', snapshotId: 'snap_1', createdAt: 10 },
      { imageId: 'sha256:two', parentImageId: 'sha256:one', snapshotId: 'snap_2', createdAt: 12 },
    ]);
    await store.deleteSnapshotDelta('sha256:one');
    expect(await store.getSnapshotDelta('sha256:one')).toBeUndefined();
    expect((await store.getSnapshotDelta('sha256:two'))?.layer.length).toBe(0);
    expect((await store.listSnapshotDeltas()).map((d) => d.imageId)).toEqual(['sha256:two']);
  });
});
