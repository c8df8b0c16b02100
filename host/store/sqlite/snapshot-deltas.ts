import type Database from 'better-sqlite3';
import type { SnapshotDelta, Store } from '../store';

type DeltaMethods = Pick<Store, 'putSnapshotDelta' | 'getSnapshotDelta' | 'deleteSnapshotDelta' | 'listSnapshotDeltas'>;
type DeltaRow = { image_id: string; parent_image_id: string; snapshot_id: string; config?: Buffer; layer?: Buffer; created_at: number };

const meta = (r: DeltaRow) => ({ imageId: r.image_id, parentImageId: r.parent_image_id, snapshotId: r.snapshot_id, createdAt: r.created_at });

/** Pending snapshot images (their config and layer bytes) until the engine loads them. */
export function sqliteSnapshotDeltas(db: Database.Database): DeltaMethods {
  const put = db.prepare(
    `INSERT INTO snapshot_deltas (image_id, parent_image_id, snapshot_id, config, layer, created_at) VALUES (?, ?, ?, ?, ?, ?)
     ON CONFLICT (image_id) DO NOTHING`,
  );
  const get = db.prepare('SELECT * FROM snapshot_deltas WHERE image_id = ?');
  const del = db.prepare('DELETE FROM snapshot_deltas WHERE image_id = ?');
  const list = db.prepare('SELECT image_id, parent_image_id, snapshot_id, created_at FROM snapshot_deltas ORDER BY created_at, image_id');
  return {
    async putSnapshotDelta(d: SnapshotDelta) {
      // The id is the config's digest: a second put of the same id carries the same bytes.
      put.run(d.imageId, d.parentImageId, d.snapshotId, d.config, d.layer, d.createdAt);
    },
    async getSnapshotDelta(imageId) {
      const r = get.get(imageId) as DeltaRow | undefined;
      return r ? { ...meta(r), config: r.config!, layer: r.layer! } : undefined;
    },
    async deleteSnapshotDelta(imageId) {
      del.run(imageId);
    },
    async listSnapshotDeltas() {
      return (list.all() as DeltaRow[]).map(meta);
    },
  };
}
