import { existsSync, readdirSync, readlinkSync } from 'node:fs';
import { isAbsolute } from 'node:path';
import type Dockerode from 'dockerode';
import type { Logger } from 'pino';
import { isBerthError } from '../errors';
import { engineError, isNotFound, isRemovalInProgress } from './engine-errors';
import { LABEL } from './labels';
import { listStoreMarkers, removeStoreMarker } from './store-marker';
import { EGRESS_LABEL, listBerthRules, parseRuleTag, removeBridgeRules, type InstalledRule } from './sandbox-network';
import { discardImage, imageExists, listSnapshotImages, listStoreTags, removeSnapshotImage, SNAPSHOT_REPO } from './snapshot-image';

/** Why the leftovers of one other store are left, or that they may go (`gone`). */
export type OrphanStoreState =
  /** The store's file is gone and no process of this machine holds it or made them: they may go. */
  | 'gone'
  /** A file is at the store's path: that store's own gc takes them. */
  | 'exists'
  /** A process that made them is alive, or a process still holds the deleted file open. */
  | 'live'
  /** A PostgreSQL store: nothing here can say whether it exists. */
  | 'unchecked'
  /** Made on another machine: its path means nothing here. */
  | 'other_machine'
  /** No location label (made by an older berth): nothing says where its store was. */
  | 'unknown';

/**
 * A firewall rule (iptables or ip6tables) put in for a sandbox network: its tag names the host and
 * lease it was put in for (`berth:<host>:<lease>`), nothing more, so its store is the one whose
 * network or container carries that host and lease (`network`: that network's name, when it is there).
 */
export interface OrphanRule extends InstalledRule {
  hostId: string;
  leaseId: string;
  network: string | null;
  /** Of an unattributed rule: its bridge is no interface of this machine now, so it matches no packet. */
  bridgeGone?: boolean;
}

/** The berth containers, sandbox networks, their firewall rules and snapshot images of one store that is not this one. */
export interface OrphanStore {
  storeId: string;
  location: string | null;
  machine: string | null;
  state: OrphanStoreState;
  /** Why, in words, for the operator. */
  why: string;
  containers: Array<{ id: string; name: string; runId: string | null; pid: number | null }>;
  networks: Array<{ id: string; name: string }>;
  /**
   * `neededBy`: what still needs the image, which is then never removed: a store that exists names
   * it in a snapshot record (it imported the run, or pulled the image from a registry: an image
   * keeps the labels of the store that committed it), or another store's container runs from it.
   */
  images: Array<{ imageId: string; tags: string[]; runId: string | null; createdAt: number; neededBy?: string }>;
  rules: OrphanRule[];
  /**
   * Its snapshot tags on images whose labels name no store (an environment's image: a fresh
   * sandbox's first snapshot, and unchanged ones after it), found by their twin
   * `berth-snapshot/<store>:<snapshot>`. Only the two tags are ever removed, never the image.
   * `neededBy`: why they stay (a store that exists records the snapshot, or the image has no name
   * of its own: removing its last tags would remove it).
   */
  tags: Array<{ snapshotId: string; imageId: string; names: string[]; neededBy?: string }>;
  /**
   * Its marker volumes (`berth-store-<id>`): left by a store that imported a run, so that one with
   * nothing else here is still found and its records read before what they name is removed.
   */
  markers: string[];
  /** Set when they were removed (`remove: true` and state `gone`). */
  removed?: { containers: number; networks: number; images: number; rules: number; tags: number; markers: number };
}

/** What {@link storeOrphans} found: by store, and the rules no network or container on the engine attributes to a store. */
export interface OrphanFindings {
  stores: OrphanStore[];
  /**
   * Rules whose host and lease no berth network or container on this engine names (or only one
   * with no store label): which store put them in cannot be told, so they are listed, never removed.
   */
  unattributedRules: OrphanRule[];
}

export interface OrphanScan {
  /** This store's id: its own leftovers are its gc's, never listed here. */
  storeId: string;
  /** This machine's name (`berth.machine` of what berth makes here). */
  machine: string;
  remove: boolean;
  logger: Logger;
  /** Whether a process of this machine with this pid exists. */
  alive(pid: number): boolean;
  /**
   * The id of the store whose file is at `location` now; undefined when it cannot be read (not a
   * store, unreadable). A store re-created at a deleted one's path has another id.
   */
  storeIdAt?(location: string): string | undefined;
  /**
   * Which of `imageIds` a store that exists still names, and which store (in words): this store,
   * and the SQLite stores at `locations` (files of this machine that other stores' labels name).
   */
  imagesNamed?(imageIds: string[], locations: string[]): Promise<Map<string, string>>;
  /** Which of `snapshotIds` a store that exists records unpruned, and which store (in words), as {@link imagesNamed}. */
  snapshotsNamed?(snapshotIds: string[], locations: string[]): Promise<Map<string, string>>;
  /** Removes the leftovers of these stores only (by id); the others are listed as ever. Unset: every gone store's. */
  only?: string[];
}

/**
 * Every berth container, sandbox network and snapshot image on this engine that belongs to another
 * store than this one, grouped by store, with whether that store is gone: a SQLite file whose path
 * no longer exists, made on this machine, with no process alive among those that made them and
 * none holding the deleted file open (a host still running on a store whose file was removed). Only
 * a `gone` store's are removed, and only with `remove`; every other state leaves them, saying why.
 */
export async function storeOrphans(docker: Dockerode, o: OrphanScan): Promise<OrphanFindings> {
  let containers: Dockerode.ContainerInfo[];
  let networks: Dockerode.NetworkInspectInfo[];
  try {
    containers = await docker.listContainers({ all: true, filters: { label: [`${LABEL.managed}=1`, LABEL.store] } });
    networks = await docker.listNetworks({ filters: { label: [`${EGRESS_LABEL}=1`, LABEL.store] } });
  } catch (err) {
    throw engineError('list berth containers', err);
  }
  const images = await listSnapshotImages(docker);
  const storeTags = await listStoreTags(docker);
  const markers = await listStoreMarkers(docker);
  // After the networks: a lease's network is made before its rules and removed after them, so a
  // rule listed now whose lease has a network has it in the listing above.
  const installed = await listBerthRules();
  const stores = new Map<string, { labels: Array<Record<string, string>>; out: OrphanStore }>();
  const of = (labels: Record<string, string>) => {
    const id = labels[LABEL.store];
    if (!id || id === o.storeId) return undefined;
    let s = stores.get(id);
    if (!s) stores.set(id, (s = { labels: [], out: { storeId: id, location: null, machine: null, state: 'unknown', why: '', containers: [], networks: [], images: [], rules: [], tags: [], markers: [] } }));
    s.labels.push(labels);
    return s.out;
  };
  const pidOf = (l: Record<string, string>) => (l[LABEL.pid] ? Number(l[LABEL.pid]) : null);
  for (const c of containers) of(c.Labels)?.containers.push({ id: c.Id, name: (c.Names[0] ?? '').replace(/^\//, ''), runId: c.Labels[LABEL.run] || null, pid: pidOf(c.Labels) });
  for (const n of networks) of(n.Labels ?? {})?.networks.push({ id: n.Id, name: n.Name });
  for (const i of images) of(i.labels)?.images.push({ imageId: i.imageId, tags: i.tags, runId: i.labels[LABEL.run] || null, createdAt: i.createdAt });
  // A twin tag names its store's id only: where the store is comes from its other things here, if any.
  for (const m of markers) of(m.labels)?.markers.push(m.name);
  for (const t of storeTags) of({ [LABEL.store]: t.storeId })?.tags.push({ snapshotId: t.snapshotId, imageId: t.imageId, names: t.names });
  const unattributedRules = attributeRules(installed, [...networks.map((n) => ({ labels: n.Labels ?? {}, network: n.Name })), ...containers.map((c) => ({ labels: c.Labels, network: null }))], o.storeId, of);
  const out: OrphanStore[] = [];
  for (const { labels, out: s } of stores.values()) {
    s.location = labels.map((l) => l[LABEL.storeLocation]).find(Boolean) ?? null;
    s.machine = labels.map((l) => l[LABEL.machine]).find(Boolean) ?? null;
    [s.state, s.why] = judge(s, labels.map(pidOf).filter((p): p is number => p !== null), o);
    out.push(s);
  }
  await markNeeded(out, containers, o);
  for (const s of out) if (o.remove && s.state === 'gone' && (!o.only || o.only.includes(s.storeId))) s.removed = await removeAll(docker, s, o.logger);
  return { stores: out, unattributedRules };
}

/** Every store file a label names that is there now: a store that exists, or one made since at a deleted one's path. */
function storeFilesHere(stores: OrphanStore[]): string[] {
  return [...new Set(stores.map((s) => s.location).filter((l): l is string => !!l && isAbsolute(l) && existsSync(l)))];
}

/**
 * Sets `neededBy` on the gone stores' images that something else needs: the label says which store
 * committed an image, not which stores use it (a store that imported the run, or pulled it from a
 * registry onto this engine, records it by id and tags it with the same snapshot id).
 */
async function markNeeded(stores: OrphanStore[], containers: Dockerode.ContainerInfo[], o: OrphanScan): Promise<void> {
  await markTagsNeeded(stores, o);
  const gone = stores.filter((s) => s.state === 'gone' && s.images.length);
  if (!gone.length) return;
  const ids = [...new Set(gone.flatMap((s) => s.images.map((i) => i.imageId)))];
  const locations = storeFilesHere(stores);
  const named = (await o.imagesNamed?.(ids, locations)) ?? new Map<string, string>();
  for (const s of gone) for (const img of s.images) {
    const user = containers.find((c) => c.ImageID === img.imageId && c.Labels[LABEL.store] !== s.storeId);
    img.neededBy = named.get(img.imageId) ?? (user ? `container ${(user.Names[0] ?? user.Id).replace(/^\//, '')} of store ${user.Labels[LABEL.store]} runs from it` : undefined);
    if (!img.neededBy) delete img.neededBy;
  }
}

/**
 * Sets `neededBy` on the gone stores' tags on environment images that must stay: a store that
 * exists records the snapshot (its id is the tag: an imported run keeps it), or the image has no
 * name of its own (not a snapshot tag), so removing the tags could remove the image. The image
 * id says nothing here: every store that ran on that environment names it.
 */
async function markTagsNeeded(stores: OrphanStore[], o: OrphanScan): Promise<void> {
  const gone = stores.filter((s) => s.state === 'gone' && s.tags.length);
  if (!gone.length) return;
  const ids = [...new Set(gone.flatMap((s) => s.tags.map((t) => t.snapshotId)))];
  const locations = storeFilesHere(stores);
  const named = (await o.snapshotsNamed?.(ids, locations)) ?? new Map<string, string>();
  for (const s of gone) for (const t of s.tags) {
    const own = t.names.some((n) => !n.startsWith(`${SNAPSHOT_REPO}:`) && !n.startsWith(`${SNAPSHOT_REPO}/`) && n !== '<none>:<none>');
    const why = named.get(t.snapshotId) ?? (own ? undefined : 'the image has no name of its own besides snapshot tags: removing them would remove it');
    if (why) t.neededBy = why;
  }
}

/**
 * Gives each rule to the store whose network (or container) carries the host and lease of its tag;
 * this store's own are left out (its plain gc's). Returns the rules nothing here attributes: a
 * network gone with its rules left (a gc that removed networks only), or made by an older berth.
 */
function attributeRules(
  rules: InstalledRule[],
  owners: Array<{ labels: Record<string, string>; network: string | null }>,
  self: string,
  of: (labels: Record<string, string>) => OrphanStore | undefined,
): OrphanRule[] {
  const byLease = new Map<string, { labels: Record<string, string>; network: string | null }>();
  const key = (hostId: string, leaseId: string) => `${hostId}\n${leaseId}`;
  // Networks first: a warm-pool container is labelled with no lease, and a network names its bridge.
  for (const x of owners) {
    const k = key(x.labels[LABEL.host] ?? '', x.labels[LABEL.lease] ?? '');
    if (x.labels[LABEL.lease] && !byLease.has(k)) byLease.set(k, x);
  }
  const unattributed: OrphanRule[] = [];
  for (const r of rules) {
    const t = parseRuleTag(r.tag);
    if (!t) continue;
    const owner = byLease.get(key(t.hostId, t.leaseId));
    const rule: OrphanRule = { ...r, hostId: t.hostId, leaseId: t.leaseId, network: owner?.network ?? null };
    const store = owner?.labels[LABEL.store];
    if (!store) unattributed.push(r.bridge ? { ...rule, bridgeGone: !existsSync(`/sys/class/net/${r.bridge}`) } : rule);
    else if (store !== self) of(owner.labels)!.rules.push(rule);
  }
  return unattributed;
}

function judge(s: OrphanStore, pids: number[], o: OrphanScan): [OrphanStoreState, string] {
  const tagsOnly = !s.containers.length && !s.networks.length && !s.images.length && !s.rules.length && !s.markers.length;
  if (tagsOnly && (!s.location || !s.machine)) return ['unknown', 'only snapshot tags on environment images name it (berth-snapshot/<store>:<snapshot>): nothing on this engine says where its store was'];
  if (!s.location || !s.machine) return ['unknown', 'no berth.store.location label (made by an older berth): nothing says where its store was'];
  if (!isAbsolute(s.location)) return ['unchecked', `store ${s.location} is not a file on this machine: it cannot be checked from here`];
  if (s.machine !== o.machine) return ['other_machine', `made on machine ${s.machine}: its store path cannot be checked from ${o.machine}`];
  // A file at the path may be another store made there since (its own id): the one that made these is gone then.
  const now = existsSync(s.location) ? (o.storeIdAt?.(s.location) ?? s.storeId) : undefined;
  if (now === s.storeId) return ['exists', `store ${s.location} exists: its own berth gc takes them`];
  const was = now === undefined ? `store ${s.location} was deleted` : `store ${s.location} is another store now (${now})`;
  const living = [...new Set(pids)].filter((p) => o.alive(p));
  if (living.length) return ['live', `${was}, but process ${living.join(', ')} that made them is alive`];
  // The new store's own hosts hold the path open too: only a handle on the deleted file counts then.
  const holders = holdersOf(s.location, now !== undefined);
  if (holders.length) return ['live', `${was}, but process ${holders.join(', ')} still holds the deleted file open`];
  return ['gone', now === undefined ? `store ${s.location} no longer exists and no process that made them is alive` : `${was}: the store that made them was deleted and no process that made them is alive`];
}

/** Processes of this machine (those this user may look at) with `path` open, deleted or not (`deletedOnly`: deleted). */
function holdersOf(path: string, deletedOnly = false): number[] {
  const out: number[] = [];
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  } catch {
    return out;
  }
  for (const pid of pids) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue; // gone meanwhile, or another user's
    }
    for (const fd of fds) {
      let target: string;
      try {
        target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        continue;
      }
      const deleted = target.endsWith(' (deleted)');
      if ((deleted || !deletedOnly) && (target === path || target === `${path} (deleted)` || target.startsWith(`${path}-`))) {
        out.push(Number(pid));
        break;
      }
    }
  }
  return out;
}

/**
 * Containers first (a network is removable only once its container is gone), then networks, their
 * rules (after the container: never a moment with the container up and the host open to it) and images.
 */
async function removeAll(docker: Dockerode, s: OrphanStore, logger: Logger): Promise<NonNullable<OrphanStore['removed']>> {
  const n = { containers: 0, networks: 0, images: 0, rules: 0, tags: 0, markers: 0 };
  const gone = (err: unknown) => isNotFound(err) || isRemovalInProgress(err);
  for (const c of s.containers) {
    try {
      await docker.getContainer(c.id).remove({ force: true, v: true });
      n.containers++;
    } catch (err) {
      if (!gone(err)) logger.warn({ err, containerId: c.id }, 'could not remove a deleted store\'s container');
    }
  }
  for (const net of s.networks) {
    try {
      await docker.getNetwork(net.id).remove();
      n.networks++;
    } catch (err) {
      if (!gone(err)) logger.warn({ err, network: net.name }, 'could not remove a deleted store\'s network');
    }
  }
  // Listed again: another gc may have taken some since, and deleting a rule that is gone fails.
  const tags = new Set(s.rules.map((r) => r.tag));
  // One that failed is named in the warning; the others were still removed and are counted.
  if (tags.size) n.rules = await removeBridgeRules((t) => tags.has(t)).catch((err: unknown) => (logger.warn({ err, storeId: s.storeId }, 'could not remove some of a deleted store\'s firewall rules'), isBerthError(err, 'rule_removal_failed') ? Number(err.details?.removed ?? 0) : 0));
  // Newest first: an image a newer one is built on can go only once that one has.
  for (const img of [...s.images].filter((i) => !i.neededBy).sort((a, b) => b.createdAt - a.createdAt)) {
    for (const tag of img.tags) await removeSnapshotImage(docker, tag).catch((err: unknown) => logger.warn({ err, tag }, 'could not remove a deleted store\'s snapshot tag'));
    await discardImage(docker, img.imageId).catch((err: unknown) => logger.warn({ err, imageId: img.imageId }, 'could not remove a deleted store\'s snapshot image'));
    if (!(await imageExists(docker, img.imageId))) n.images++;
  }
  for (const t of s.tags.filter((x) => !x.neededBy)) n.tags += await removeEnvironmentTags(docker, s.storeId, t, logger);
  // Last: until the rest is gone, the marker is what says where the store was.
  for (const m of s.markers) {
    if (await removeStoreMarker(docker, m).catch((err: unknown) => (logger.warn({ err, volume: m }, 'could not remove a deleted store\'s marker'), false))) n.markers++;
  }
  return n;
}

/**
 * Removes a gone store's snapshot tag on an environment's image and its twin, never the image: the
 * image is looked at again just before (another store may have removed its own name meanwhile),
 * and the tags are untagged only while it keeps a name that is not a snapshot tag.
 */
async function removeEnvironmentTags(docker: Dockerode, storeId: string, t: OrphanStore['tags'][number], logger: Logger): Promise<number> {
  const plain = `${SNAPSHOT_REPO}:${t.snapshotId}`;
  const twin = `${SNAPSHOT_REPO}/${storeId}:${t.snapshotId}`;
  let removed = 0;
  for (const name of [plain, twin]) {
    const names = await docker.getImage(t.imageId).inspect().then((i) => i.RepoTags ?? [], () => [] as string[]);
    if (!names.includes(name)) continue;
    if (!names.some((n) => !n.startsWith(`${SNAPSHOT_REPO}:`) && !n.startsWith(`${SNAPSHOT_REPO}/`) && n !== '<none>:<none>')) {
      logger.warn({ tag: name, imageId: t.imageId }, 'left a deleted store\'s snapshot tag: the image has no other name now');
      break;
    }
    try {
      // noprune: only the name goes, whatever the engine would otherwise take with it.
      await docker.getImage(name).remove({ noprune: true });
      removed++;
    } catch (err) {
      if (!isNotFound(err)) logger.warn({ err, tag: name }, 'could not remove a deleted store\'s snapshot tag');
    }
  }
  // The twin and the plain tag are one snapshot's: counted once.
  return removed ? 1 : 0;
}
