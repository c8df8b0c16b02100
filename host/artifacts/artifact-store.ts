import type { Readable } from 'node:stream';

/** What one stored blob is now, against the digest and size committed for it. */
export type BlobState = 'present' | 'missing' | 'altered';

/**
 * Where artifact bytes live, addressed by their sha256. The local directory store is the default;
 * a registry-backed one (OCI blobs over the distribution API) fits the same shape. Bytes are never
 * trusted on the way back: {@link ArtifactStore.check} re-hashes, and readers hash what they read.
 */
export interface ArtifactStore {
  /** Where it keeps blobs (a directory, a registry URL): for messages. */
  readonly location: string;
  /**
   * Streams `source` in, hashing it; stores it under its sha256 once it is complete (a partial
   * write never becomes a blob) and returns digest and size. Putting bytes already there is a
   * no-op; putting them over an altered blob of the same digest repairs it.
   */
  put(source: Readable, opts?: { signal?: AbortSignal }): Promise<{ sha256: string; size: number }>;
  /** Whether the blob is there with exactly `size` bytes hashing to `sha256` (reads it all). */
  check(sha256: string, size: number, opts?: { signal?: AbortSignal }): Promise<BlobState>;
  /** The blob's bytes, unverified: the reader hashes them (see fetch.ts). Throws `artifact_missing` when absent. */
  open(sha256: string): Promise<Readable>;
}
