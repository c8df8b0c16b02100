import { hostname } from 'node:os';
import { processAlive } from '../support/process-alive';
import { storeOrphans, type OrphanRule, type OrphanStore } from '../sandbox';
import { sqliteImagesNamed, sqliteSnapshotsNamed, sqliteStoreIdentity, type Store } from '../store';
import type { RuntimeParts } from './runtime';

/** What `berth gc --orphans` found (and, with `remove`, removed) of stores other than this one. */
export interface OrphansReport {
  /** The store it ran from, whose own leftovers are its plain gc's; null when it ran from none. */
  storeId: string | null;
  remove: boolean;
  stores: OrphanStore[];
  /** Firewall rules of sandbox networks that nothing on the engine attributes to a store: listed, never removed. */
  unattributedRules: OrphanRule[];
}

/**
 * `berth gc --orphans [--remove]`: the containers, sandbox networks (and their firewall rules) and
 * snapshot images on this engine that another store made, by store, and whether that store is gone (its SQLite file deleted
 * on this machine, and no process that made them alive or holding the deleted file open). No
 * store's records name another's leftovers, so a deleted store's would stay for ever: only these
 * labels find them. Nothing is removed without `remove`, and then only a gone store's; a store
 * that exists, a live host's, one on PostgreSQL or another machine, or one whose things carry no
 * location label (an older berth) is listed with why it is left.
 */
export async function orphans(p: RuntimeParts, o: { remove?: boolean; only?: string[] } = {}): Promise<OrphansReport> {
  return orphansOnEngine(p, { ...o, storeId: await p.sandbox.storeId(), store: p.store });
}

/**
 * {@link orphans} with no store of the caller's (`storeId` null: every store's leftovers are
 * looked at): `berth gc --orphans` where the operator's only store was deleted, which opens none.
 */
export async function orphansOnEngine(p: Pick<RuntimeParts, 'docker' | 'logger'>, o: { remove?: boolean; only?: string[]; storeId?: string | null; store?: Store } = {}): Promise<OrphansReport> {
  const storeId = o.storeId ?? null;
  const imagesNamed = async (ids: string[], locations: string[]) => {
    const out = new Map<string, string>();
    // This store, whatever its kind (PostgreSQL too); the other stores that exist by their files.
    if (o.store) for (const snap of await o.store.listSnapshots({ pruned: false })) if (ids.includes(snap.imageId)) out.set(snap.imageId, `this store (${storeId}) names it in snapshot ${snap.id}`);
    for (const location of locations) {
      const named = sqliteImagesNamed(location, ids);
      // A store file that cannot be read now may name any of them: all are kept.
      for (const id of ids) if (!out.has(id) && (named === undefined || named.has(id))) out.set(id, named ? `store ${location} names it` : `store ${location} exists and could not be read`);
    }
    return out;
  };
  const snapshotsNamed = async (ids: string[], locations: string[]) => {
    const out = new Map<string, string>();
    if (o.store) for (const id of ids) {
      const snap = await o.store.getSnapshot(id);
      if (snap && snap.prunedAt == null) out.set(id, `this store (${storeId}) records snapshot ${id}`);
    }
    for (const location of locations) {
      const named = sqliteSnapshotsNamed(location, ids);
      for (const id of ids) if (!out.has(id) && (named === undefined || named.has(id))) out.set(id, named ? `store ${location} records snapshot ${id}` : `store ${location} exists and could not be read`);
    }
    return out;
  };
  const { stores, unattributedRules } = await storeOrphans(p.docker, { storeId: storeId ?? '', machine: hostname(), remove: o.remove === true, only: o.only, logger: p.logger, alive: (pid) => pid !== process.pid && processAlive(pid), storeIdAt: sqliteStoreIdentity, imagesNamed, snapshotsNamed });
  return { storeId, remove: o.remove === true, stores, unattributedRules };
}
