/**
 * Container labels. Every container the adapter creates carries `managed`, `host` and `created`,
 * so that a sweeper can always find what a dead process left behind.
 */
export const LABEL = {
  managed: 'berth.managed',
  session: 'berth.session',
  lease: 'berth.lease',
  host: 'berth.host',
  /** The store whose lease this is (see LeaseRecords.storeId); only that store's sweeper removes it. */
  store: 'berth.store',
  fingerprint: 'berth.env.fingerprint',
  created: 'berth.created',
  /** Set on warm-pool containers; labels cannot change after create, so it stays after assignment. */
  pool: 'berth.pool',
  /** The SandboxHost instance that created the container; tells a live pool from a dead one. */
  instance: 'berth.instance',
  /** The run-ownership epoch (issue 15) the container was leased under; an older epoch's sandbox is never used. */
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
  leaseId?: string;
  pool?: boolean;
  /** The owner's epoch of the session when leased by a per-session owner (a worker). */
  epoch?: number;
}

/** The labels of a sandbox container; pool containers get empty session and lease labels. */
export function containerLabels(input: LabelInput): Record<string, string> {
  const labels: Record<string, string> = {
    [LABEL.managed]: '1',
    [LABEL.host]: input.hostId,
    [LABEL.store]: input.storeId,
    [LABEL.instance]: input.instanceId,
    [LABEL.fingerprint]: input.envFingerprint,
    [LABEL.created]: String(input.createdAt),
    [LABEL.session]: input.sessionId ?? '',
    [LABEL.lease]: input.leaseId ?? '',
  };
  // Always set: a container inherits the labels of its image, and a snapshot image carries those of
  // the container it was committed from, pool label included.
  labels[LABEL.pool] = input.pool ? '1' : '0';
  if (input.epoch !== undefined) labels[LABEL.epoch] = String(input.epoch);
  return labels;
}
