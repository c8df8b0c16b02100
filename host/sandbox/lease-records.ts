// The record types live with the rest of the ground (host/model); the sandbox adapter talks to the store only through this port.
export type { LeaseRecord, LeaseRecords, SweepRecord } from '../model/lease';
