import { BerthError } from '../../errors';

/** What one reading of a sandbox's files may cost the host (per snapshot or digest). */
export interface ReadBounds {
  /** Entries of any kind looked at (files, directories, links, others). */
  maxEntries: number;
  /** Bytes hashed or copied (a hole counts as the zeros it reads as). */
  maxBytes: number;
  /** Wall-clock time of one reading. */
  maxMs: number;
  /** Directory depth below the root (each level holds one open descriptor while it is walked). */
  maxDepth: number;
  /** The sandbox's disk limit: no file of a workspace that fits in it can be bigger. */
  diskLimitBytes?: number;
}

/**
 * The host's defaults. Generous for real builds (a million entries, 64 GiB, 30 minutes), small
 * enough that a hostile workspace cannot hold the host for hours; a sandbox's disk limit is tighter.
 */
export const DEFAULT_READ_BOUNDS: ReadBounds = { maxEntries: 1_000_000, maxBytes: 64 * 2 ** 30, maxMs: 30 * 60_000, maxDepth: 8_192 };

/** Which bound a reading went past. */
export type BoundName = 'entries' | 'bytes' | 'time' | 'depth' | 'disk' | 'path length';

/**
 * The typed error of a reading past a bound. It names the bound and, at most, a workspace path
 * (as the sandbox sees it): never a host path.
 */
export function boundError(bound: BoundName, limit: number, what: string): BerthError {
  return new BerthError('snapshot_bound_exceeded', `reading the sandbox's files went past the ${bound} bound (${limit}): ${what}`, { details: { bound, limit } });
}

const PATH_MAX = 4096;

/** Counts one reading's cost against its bounds, and stops it when the run is cancelled. */
export class ReadBudget {
  private entries = 0;
  private bytes = 0;
  private readonly deadline: number;

  constructor(
    readonly bounds: ReadBounds = DEFAULT_READ_BOUNDS,
    readonly signal?: AbortSignal,
  ) {
    this.deadline = Date.now() + bounds.maxMs;
  }

  /** One more entry looked at. */
  entry(): void {
    if (++this.entries > this.bounds.maxEntries) throw boundError('entries', this.bounds.maxEntries, `more than ${this.bounds.maxEntries} entries`);
    if ((this.entries & 255) === 0) this.check();
  }

  /** A file of `size` bytes is about to be read: refused before any byte is. */
  file(size: number, path: string): void {
    const disk = this.bounds.diskLimitBytes;
    if (disk !== undefined && size > disk) throw boundError('disk', disk, `${path} has ${size} bytes, more than the sandbox's disk limit`);
    if (this.bytes + size > this.bounds.maxBytes) throw boundError('bytes', this.bounds.maxBytes, `${path} would make the reading more than ${this.bounds.maxBytes} bytes`);
    this.bytes += size;
  }

  depth(d: number, path: string): void {
    if (d > this.bounds.maxDepth) throw boundError('depth', this.bounds.maxDepth, `${path.slice(0, 200)}... is nested more than ${this.bounds.maxDepth} directories deep`);
  }

  /**
   * A container path longer than PATH_MAX: the engine's commit walks the layer by paths and drops
   * what lies deeper (measured: a 5,000-deep tree came back 1,996 deep), so such a workspace can
   * be kept by no snapshot. Refused by name rather than recorded as something a restore cannot give.
   */
  pathLength(containerPath: string, p: string): void {
    if (containerPath.length * 3 < PATH_MAX) return;
    if (Buffer.byteLength(containerPath) >= PATH_MAX) throw boundError('path length', PATH_MAX - 1, `${p.slice(0, 120)}... is a path longer than an image layer can keep (${Buffer.byteLength(containerPath)} bytes)`);
  }

  /** Throws when the run was cancelled or the time bound passed. */
  check(): void {
    this.signal?.throwIfAborted();
    if (Date.now() > this.deadline) throw boundError('time', this.bounds.maxMs, `the reading took more than ${this.bounds.maxMs} ms`);
  }

  get bytesRead(): number {
    return this.bytes;
  }
}
