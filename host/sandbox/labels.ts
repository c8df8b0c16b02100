/**
 * Container labels. Every container the adapter creates carries `managed`, `host` and `created`,
 * so that a sweeper can always find what a dead process left behind.
 */
export const LABEL = {
  managed: 'berth.managed',
  session: 'berth.session',
  /** The run the sandbox serves (an agent session's sandbox: the session id), so every sandbox of a run can be found. */
  run: 'berth.run',
  lease: 'berth.lease',
  host: 'berth.host',
  /** The store whose lease this is (see LeaseRecords.storeId); only that store's sweeper removes it. */
  store: 'berth.store',
  /**
   * Where that store is (a SQLite file's absolute path, a PostgreSQL URL without its password), the
   * machine (hostname) and the pid of the process that made the container or image: what
   * `berth gc --orphans` needs to tell a store whose file was deleted, and whose host is gone, from
   * one that still exists (no store's records reach another store's leftovers).
   */
  storeLocation: 'berth.store.location',
  machine: 'berth.machine',
  pid: 'berth.pid',
  fingerprint: 'berth.env.fingerprint',
  created: 'berth.created',
  /** Set on warm-pool containers; labels cannot change after create, so it stays after assignment. */
  pool: 'berth.pool',
  /** The SandboxHost instance that created the container; tells a live pool from a dead one. */
  instance: 'berth.instance',
  /** The ownership epoch of the session's owner that leased the container (the lease record's epoch may be newer: an adopting owner raises it). */
  epoch: 'berth.epoch',
} as const;

/** What the labels of one container are made from. */
export interface LabelInput {
  hostId: string;
  storeId: string;
  instanceId: string;
  envFingerprint: string;
  createdAt: number;
  /** Absent for warm-pool containers, which are created before any session exists. */
  sessionId?: string;
  runId?: string;
  leaseId?: string;
  pool?: boolean;
  /** The epoch of the session's owner that leased it. */
  epoch?: number;
  /** `berth.store.location`, `berth.machine` and `berth.pid` (see {@link storeLabels}). */
  origin?: Record<string, string>;
}

/** The `berth.store.location` of a store on a database server: never its address (labels reach registries), and no file either. */
export const SERVER_STORE_LOCATION = 'postgresql';

/**
 * The location as labelled: a SQLite file's path made absolute (gc --orphans checks that file), a
 * URL or {@link SERVER_STORE_LOCATION} as it is. Resolving 'postgresql' against the working
 * directory made a live PostgreSQL store's sandboxes and snapshot images look like those of a
 * deleted file (`/cwd/postgresql`), which `berth gc --orphans --remove` from any other store took.
 */
export function labelledLocation(location: string | undefined, resolveFile: (p: string) => string): string | undefined {
  if (!location || location === SERVER_STORE_LOCATION || /^[a-z]+:\/\//i.test(location)) return location;
  return resolveFile(location);
}

/** The labels that say which store, machine and process made a container or snapshot image. */
export function storeLabels(storeId: string, storeLocation: string | undefined, machine: string, pid: number): Record<string, string> {
  return { [LABEL.store]: storeId, ...(storeLocation ? { [LABEL.storeLocation]: storeLocation } : {}), [LABEL.machine]: machine, [LABEL.pid]: String(pid) };
}

/** The labels of a sandbox container; pool containers get empty session and lease labels. */
export function containerLabels(input: LabelInput): Record<string, string> {
  const labels: Record<string, string> = {
    ...input.origin,
    [LABEL.managed]: '1',
    [LABEL.host]: input.hostId,
    [LABEL.store]: input.storeId,
    [LABEL.instance]: input.instanceId,
    [LABEL.fingerprint]: input.envFingerprint,
    [LABEL.created]: String(input.createdAt),
    [LABEL.session]: input.sessionId ?? '',
    // Always set, like the session: a snapshot image carries the run label of the run it came from.
    [LABEL.run]: input.runId ?? '',
    [LABEL.lease]: input.leaseId ?? '',
  };
  // Always set: a container inherits the labels of its image, and a snapshot image carries those of
  // the container it was committed from, pool label included.
  labels[LABEL.pool] = input.pool ? '1' : '0';
  if (input.epoch !== undefined) labels[LABEL.epoch] = String(input.epoch);
  return labels;
}
