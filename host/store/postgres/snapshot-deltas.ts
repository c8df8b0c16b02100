import type pg from 'pg';
import type { SnapshotDelta, Store } from '../store';
import { query } from './open';

type DeltaMethods = Pick<Store, 'putSnapshotDelta' | 'getSnapshotDelta' | 'deleteSnapshotDelta' | 'listSnapshotDeltas'>;
type DeltaRow = { image_id: string; parent_image_id: string; snapshot_id: string; config?: Buffer; layer?: Buffer; created_at: string | number };

const meta = (r: DeltaRow) => ({ imageId: r.image_id, parentImageId: r.parent_image_id, snapshotId: r.snapshot_id, createdAt: Number(r.created_at) });

/** Pending snapshot images until the engine loads them (see the SQLite twin). */
export function postgresSnapshotDeltas(pool: pg.Pool): DeltaMethods {
  return {
    async putSnapshotDelta(d: SnapshotDelta) {
      await query(
        pool,
        `INSERT INTO snapshot_deltas (image_id, parent_image_id, snapshot_id, config, layer, created_at) VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (image_id) DO NOTHING`,
        [d.imageId, d.parentImageId, d.snapshotId, d.config, d.layer, d.createdAt],
      );
    },
    async getSnapshotDelta(imageId) {
      const [r] = await query<DeltaRow>(pool, 'SELECT * FROM snapshot_deltas WHERE image_id = $1', [imageId]);
      return r ? { ...meta(r), config: r.config!, layer: r.layer! } : undefined;
    },
    async deleteSnapshotDelta(imageId) {
      await query(pool, 'DELETE FROM snapshot_deltas WHERE image_id = $1', [imageId]);
    },
    async listSnapshotDeltas() {
      return (await query<DeltaRow>(pool, 'SELECT image_id, parent_image_id, snapshot_id, created_at FROM snapshot_deltas ORDER BY created_at, image_id')).map(meta);
    },
  };
}
