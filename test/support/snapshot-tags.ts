import type Dockerode from 'dockerode';
import { existsSync } from 'node:fs';
import { readStore } from './temp-store';
import { removeSnapshotImage } from '../../host/sandbox/snapshot-image';

/**
 * Removes the `berth-snapshot:<id>` tag (and its twin naming the store) of every snapshot the store at `store` records. A fresh
 * sandbox's first snapshot is its environment image tagged (host/snapshot, ofFreshImage): that
 * image carries the environment's labels, not the host's, so a clean-up by `berth.host` label never
 * sees the tag; 158 such tags had piled up on berth/tiny (24 per `bench -- plan` run, a few per suite).
 */
export async function removeStoreSnapshotTags(docker: Dockerode, store: string): Promise<void> {
  if (!existsSync(store)) return;
  const [storeId, ids] = await readStore(store, async (s) => [await s.storeId(), (await s.listSnapshots({})).map((x) => x.id)] as const).catch(() => ['', [] as string[]] as const);
  // Its marker, when it imported a run (host/sandbox/store-marker.ts).
  if (storeId) await docker.getVolume(`berth-store-${storeId}`).remove().catch(() => {});
  // With its twin naming the store (`berth-snapshot/<store>:<id>`, on an environment's image).
  for (const id of ids) await removeSnapshotImage(docker, id).catch(() => {});
}
