import type { Json } from './json';
import type { RunState } from './run-states';
import type { EffectAttempt, EffectStatus, ReplayPolicy } from './effect';

/** The durable scope of one piece of work; `lastSeq` is its newest commit number. */
export interface Session {
  id: string;
  createdAt: number;
  lastSeq: number;
  meta: Json;
}

export interface Conversation {
  id: string;
  sessionId: string;
  createdAt: number;
}

/** An accepted input; `requestId` is the caller's idempotency key. */
export interface Submission {
  id: string;
  sessionId: string;
  requestId: string;
  runId: string;
  input: Json;
  createdAt: number;
}

/** Versions in force when a run transition happened. */
export interface RunVersions {
  kernel?: string;
  envFingerprint?: string;
  imageDigest?: string;
}

export interface Run {
  id: string;
  sessionId: string;
  submissionId: string | null;
  kind: string;
  state: RunState;
  rootTaskId: string | null;
  transitionCount: number;
  versions: RunVersions;
  createdAt: number;
  updatedAt: number;
}

export interface RunTransition {
  runId: string;
  n: number;
  at: number;
  actor: string;
  from: RunState | null;
  to: RunState;
  reason: string;
  versions: RunVersions;
  commitSeq: number;
}

/** Immutable: the store refuses updates and deletes of entries. */
export interface Entry {
  id: string;
  sessionId: string;
  seq: number;
  conversationId: string | null;
  runId: string | null;
  taskId: string | null;
  kind: string;
  body: Json;
  commitSeq: number;
  at: number;
}

export interface Effect {
  id: string;
  sessionId: string;
  runId: string | null;
  taskId: string | null;
  kind: string;
  intent: Json;
  replay: ReplayPolicy;
  status: EffectStatus;
  attempts: number;
  /** Every attempt, oldest first (empty for an effect written before attempts were kept). */
  attemptLog: EffectAttempt[];
  receipt: Json;
  error: Json;
  createdAt: number;
  updatedAt: number;
}

/** A document as stored: the newest baseline and the operations after it. */
export interface StoredDocument {
  id: string;
  sessionId: string;
  runId: string | null;
  type: string;
  version: number;
  baselineVersion: number;
  baseline: Json;
  ops: Array<{ version: number; op: Json }>;
}

/** A saved sandbox state tied to a committed checkpoint. `prunedAt` is set when its image was removed by retention. */
export interface Snapshot {
  id: string;
  sessionId: string;
  runId: string | null;
  taskId: string | null;
  leaseId: string;
  imageId: string;
  workspaceDigest: string;
  sizeBytes: number;
  checkpoint: string;
  parentId: string | null;
  commitSeq: number;
  createdAt: number;
  prunedAt: number | null;
  /** The pushed image's manifest in an OCI registry (`host/repo@sha256:…`), null while not pushed. */
  registryRef: string | null;
  /** When the registry acknowledged the push. */
  pushedAt: number | null;
}

export interface CommitRecord {
  sessionId: string;
  seq: number;
  at: number;
  label: string;
  actor: string;
}
