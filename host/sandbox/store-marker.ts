import type Dockerode from 'dockerode';
import { engineError, isNotFound } from './engine-errors';
import { LABEL } from './labels';

/** The label of a store's marker volume (see {@link markStore}). */
export const MARKER_LABEL = 'berth.store.marker';

/** The marker volume's name: one per store and engine. */
export const markerName = (storeId: string) => `berth-store-${storeId}`;

/**
 * Leaves on the engine an empty volume labelled with the store's id, location, machine and pid:
 * what lets `berth gc --orphans` find a store that has nothing else here, yet needs what another
 * store left (it imported that store's run: its records name the other store's snapshot images
 * and tags, whose labels name only the store that made them). With its location known, that
 * store's records are read before anything they name is removed. Made once; an existing one is
 * kept as it is (the engine answers a create of an existing local volume with that volume).
 */
export async function markStore(docker: Dockerode, labels: Record<string, string>): Promise<void> {
  const storeId = labels[LABEL.store];
  if (!storeId) return;
  try {
    await docker.createVolume({ Name: markerName(storeId), Labels: { ...labels, [MARKER_LABEL]: '1' } });
  } catch (err) {
    throw engineError(`mark store ${storeId} on the engine`, err);
  }
}

/** Every store marker volume on this engine. */
export async function listStoreMarkers(docker: Dockerode): Promise<Array<{ name: string; labels: Record<string, string> }>> {
  try {
    const r = (await docker.listVolumes({ filters: { label: [MARKER_LABEL] } })) as { Volumes?: Array<{ Name: string; Labels?: Record<string, string> | null }> | null };
    return (r.Volumes ?? []).map((v) => ({ name: v.Name, labels: v.Labels ?? {} }));
  } catch (err) {
    throw engineError('list store markers', err);
  }
}

/** Removes a marker volume; one already gone counts as removed. */
export async function removeStoreMarker(docker: Dockerode, name: string): Promise<boolean> {
  try {
    await docker.getVolume(name).remove();
    return true;
  } catch (err) {
    if (isNotFound(err)) return true;
    throw engineError(`remove store marker ${name}`, err);
  }
}
