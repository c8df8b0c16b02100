import type Dockerode from 'dockerode';
import { existsSync } from 'node:fs';
import { readStore } from './temp-store';
import { listStoreTags, removeSnapshotImage } from '../../host/sandbox/snapshot-image';

/**
 * Removes the `berth-snapshot:<id>` tag (and its twin naming the store) of every snapshot the store at `store` records. A fresh
 * sandbox's first snapshot is its environment image tagged (host/snapshot, ofFreshImage): that
 * image carries the environment's labels, not the host's, so a clean-up by `berth.host` label never
 * sees the tag; 158 such tags had piled up on berth/tiny (24 per `bench -- plan` run, a few per suite).
 */
export async function removeStoreSnapshotTags(docker: Dockerode, store: string): Promise<void> {
  // A PostgreSQL store (postgres://) is read as it is; a SQLite file already removed has nothing to say.
  if (!/^postgres(ql)?:\/\//.test(store) && !existsSync(store)) return;
  const [storeId, ids] = await readStore(store, async (s) => [await s.storeId(), (await s.listSnapshots({})).map((x) => x.id)] as const).catch(() => ['', [] as string[]] as const);
  // Its marker, when it imported a run (host/sandbox/store-marker.ts).
  if (storeId) await docker.getVolume(`berth-store-${storeId}`).remove().catch(() => {});
  // With its twin naming the store (`berth-snapshot/<store>:<id>`, on an environment's image).
  for (const id of ids) await removeSnapshotImage(docker, id).catch(() => {});
  // A tag the store never recorded (a host killed between the tag and its commit) still names the
  // store by its twin: nothing else on the engine would ever say whose it was.
  // Snapshot images of this store that another host id made (a second engine's `-b` host, whose
  // snapshot a resume here pulled from a registry, by digest: no tag, labels naming that host).
  const own = storeId ? await docker.listImages({ filters: { label: [`berth.store=${storeId}`] } }).catch(() => []) : [];
  for (const img of own) {
    const tags = (img.RepoTags ?? []).filter((t) => t !== '<none>:<none>');
    for (const tag of tags) if (tag.startsWith('berth-snapshot:')) await docker.getImage(tag).remove().catch(() => {});
    // Only registry digests left: nothing of anyone else's to lose by a forced removal.
    if (tags.every((t) => t.startsWith('berth-snapshot:'))) await docker.getImage(img.Id).remove({ force: true }).catch(() => {});
  }
  for (const t of storeId ? await listStoreTags(docker).catch(() => []) : []) {
    if (t.storeId !== storeId) continue;
    await docker.getImage(`berth-snapshot/${t.storeId}:${t.snapshotId}`).remove().catch(() => {});
    await removeSnapshotImage(docker, t.snapshotId).catch(() => {});
  }
}
