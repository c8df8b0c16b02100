import type Dockerode from 'dockerode';
import type { Store } from '../../host/store';
import { readStore } from './temp-store';

type StoreReader = Store;

/** One engine object labelled with the test's host id that the store does not record as kept. */
export interface Leftover {
  kind: 'container' | 'network' | 'image';
  id: string;
  /** Container name, network name or image tag, for the failure message. */
  name: string;
  labels: Record<string, string>;
  reason: string;
}

const SNAPSHOT_TAG = 'berth-snapshot:';

/**
 * Every container, network and snapshot image labelled `berth.host=<hostId>` that the store does
 * not record as kept (issue 12, "Show it works"): a container is kept only if an unreleased lease
 * names it (an agent session's kept sandbox is such a lease); a network only if its `berth.lease`
 * label names an unreleased lease; a snapshot image tag only if a snapshot record with that id
 * exists and is not pruned. An untagged snapshot image is never kept: nothing can name it.
 * `store` is a path (opened read-only for this look, as another process would) or an open store.
 */
export async function findLeftovers(docker: Dockerode, hostId: string, store: string | StoreReader): Promise<Leftover[]> {
  const look = async (s: StoreReader) => {
    const unreleased = await s.listLeases({ unreleased: true });
    const snapshots = await s.listSnapshots({});
    return {
      leaseIds: new Set(unreleased.map((l) => l.id)),
      containerIds: new Set(unreleased.map((l) => l.containerId).filter((id) => id !== '')),
      liveSnapshots: new Set(snapshots.filter((x) => x.prunedAt === null).map((x) => x.id)),
      allSnapshots: new Set(snapshots.map((x) => x.id)),
    };
  };
  const kept = typeof store === 'string' ? await readStore(store, look) : await look(store);
  const label = [`berth.host=${hostId}`];
  const out: Leftover[] = [];
  for (const c of await docker.listContainers({ all: true, filters: { label } })) {
    if (kept.containerIds.has(c.Id)) continue;
    const lease = c.Labels['berth.lease'] ?? '';
    const reason = lease === ''
      ? `no lease names it (state ${c.State}${c.Labels['berth.pool'] === '1' ? ', warm-pool container' : ''})`
      : kept.leaseIds.has(lease)
        ? `its lease ${lease} is unreleased but names another container (state ${c.State})`
        : `its lease ${lease} is released or unrecorded (state ${c.State})`;
    out.push({ kind: 'container', id: c.Id, name: (c.Names ?? []).join(','), labels: c.Labels, reason });
  }
  for (const n of await docker.listNetworks({ filters: { label } })) {
    const lease = n.Labels?.['berth.lease'] ?? '';
    if (lease !== '' && kept.leaseIds.has(lease)) continue;
    out.push({ kind: 'network', id: n.Id, name: n.Name, labels: n.Labels ?? {}, reason: lease === '' ? 'no berth.lease label' : `its lease ${lease} is released or unrecorded` });
  }
  for (const img of await docker.listImages({ filters: { label } })) {
    const tags = (img.RepoTags ?? []).filter((t) => t.startsWith(SNAPSHOT_TAG));
    const labels = img.Labels ?? {};
    if (tags.length === 0) {
      // Only snapshot images are this check's business; an untagged one that says it is a snapshot
      // has no name any record or prune can reach.
      if (labels['berth.snapshot'] !== undefined && (img.RepoTags ?? []).filter((t) => t !== '<none>:<none>').length === 0) {
        out.push({ kind: 'image', id: img.Id, name: '<untagged>', labels, reason: `untagged snapshot image (berth.snapshot=${labels['berth.snapshot']})` });
      }
      continue;
    }
    for (const tag of tags) {
      const id = tag.slice(SNAPSHOT_TAG.length);
      if (kept.liveSnapshots.has(id)) continue;
      out.push({ kind: 'image', id: img.Id, name: tag, labels, reason: kept.allSnapshots.has(id) ? `snapshot ${id} is recorded as pruned` : `no snapshot record ${id}` });
    }
  }
  return out;
}

/** The leftovers as lines an operator can act on (ids first). */
export function describeLeftovers(hostId: string, leftovers: Leftover[]): string {
  const lines = leftovers.map((l) => `  ${l.kind} ${l.id.replace(/^sha256:/, '').slice(0, 12)} ${l.name}: ${l.reason} [session=${l.labels['berth.session'] ?? ''} run=${l.labels['berth.run'] ?? ''} lease=${l.labels['berth.lease'] ?? ''}]`);
  return `host ${hostId} left ${leftovers.length} object(s) the store does not record as kept:\n${lines.join('\n')}`;
}

/** For opt-outs that allow only a snapshot image whose record never committed (a kill in between). */
export const unrecordedSnapshotImages = (l: Leftover): boolean => l.kind === 'image' && l.reason.startsWith('no snapshot record');

/**
 * The fixtures' side of the check: `allowLeftovers(reason, only?)` opts the current test out,
 * explicitly and with a reason (a test that kills the host and never resumes, or removes records by
 * hand); with `only`, just the leftovers it matches are allowed and any other still fails the test.
 * `check` finds the leftovers and returns the error to throw after removal, or undefined.
 */
export function leakGuard(docker: Dockerode, hostId: string) {
  let allowed: { reason: string; only: (l: Leftover) => boolean } | undefined;
  return {
    allowLeftovers(reason: string, only: (l: Leftover) => boolean = () => true): void {
      if (reason.trim() === '') throw new Error('allowLeftovers needs a reason');
      allowed = { reason, only };
    },
    async check(store: string | StoreReader): Promise<Error | undefined> {
      const leftovers = await findLeftovers(docker, hostId, store);
      const excused = allowed ? leftovers.filter(allowed.only) : [];
      const failing = leftovers.filter((l) => !excused.includes(l));
      if (excused.length) console.warn(`[leak check] allowed (${allowed!.reason}): ${describeLeftovers(hostId, excused)}`);
      if (failing.length === 0) return undefined;
      const text = describeLeftovers(hostId, failing);
      console.error(`[leak check] ${text}`);
      return new Error(`[leak check] ${text}`);
    },
  };
}
