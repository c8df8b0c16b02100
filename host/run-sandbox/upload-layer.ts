import { createHash } from 'node:crypto';
import { resolve } from 'node:path';
import type { Environment } from '../../environment';
import { packHostDir, parseOwner, scanHostDir, type Lease, type SkippedEntry } from '../sandbox';
import { FLATTEN_DEPTH, timed, type Snapshotter } from '../snapshot';
import type { Store } from '../store';
import { faultPoint, newId } from '../support';

/** What {@link uploadAsLayer} made: the upload snapshot's image, with the workspace in it as one layer. */
export interface UploadImage {
  snapshotId: string;
  imageId: string;
  layerBytes: number;
  files: number;
  bytes: number;
  skipped: SkippedEntry[];
}

/**
 * Whether a plan's workspace can be uploaded as a layer built here: the engine takes host-built
 * layers, the workspace is one directory below the root (its tar entry then needs no parents
 * whose owner this host would have to guess), no secrets are declared (the upload snapshot's
 * secret check reads the container's changes, and a container made from this image has none:
 * such a plan keeps the upload into the container) and no registry takes the snapshots (the
 * base image's push and pull are done by the fresh lease from the base). Why not, or `undefined`.
 */
export function canUploadAsLayer(env: Environment, snapshots: Snapshotter, registry: boolean): string | undefined {
  if (!snapshots.images.supported) return 'the engine cannot take layers built here';
  if (registry) return 'snapshots go to a registry';
  if (env.secrets.length > 0) return 'secrets are declared';
  if (!/^\/[^/]+$/.test(env.workspace.path.replace(/\/+$/, ''))) return 'the workspace is not one directory below the root';
  if (env.snapshot.policy === 'never') return 'snapshot policy never';
  return undefined;
}

/**
 * The uploaded workspace as an image built on this host: the directory's tar (what an upload into
 * a container writes, with the same owner, modes and times) as one layer over the environment's
 * image, loaded into the engine from memory before it returns (never through the store). A sandbox leased from
 * this image holds the workspace from its first moment: no archive put into a fresh container,
 * no commit of it, and no second container to re-base on that commit (a plan's upload cost three
 * engine operations of ~100-400 ms each; this is one load). The caller leases from it, reads it
 * back (the digest every later verification compares with is the container's own reading, not
 * this host's) and commits it as the `upload` snapshot. Until that commit, nothing names the
 * image: a host killed in between leaves it for gc, like any unrecorded snapshot.
 */
export async function uploadAsLayer(
  d: { snapshots: Snapshotter; store: Store; logger: import('pino').Logger; hostId: string; storeLabels?: Record<string, string> },
  o: { env: Environment; hostDir: string; runId: string; sessionId: string; signal: AbortSignal; onProgress?: (message: string) => void },
): Promise<UploadImage | undefined> {
  const parent = o.env.image.digest;
  if (!parent) return undefined;
  const scan = await scanHostDir(o.hostDir);
  const limit = o.env.resources.diskMb;
  // Over the disk limit: the upload into a container says so, with its own error.
  if (limit !== undefined && scan.bytes > limit * 1024 * 1024) return undefined;
  // A big workspace takes seconds to pack, load and read back (20,000 files: ~5 s here): said
  // before, so the operator does not watch a silent terminal.
  const files = scan.entries.filter((e) => e.kind === 'file').length;
  if (files >= BIG_UPLOAD_FILES || scan.bytes >= BIG_UPLOAD_BYTES) o.onProgress?.(`uploading ${files} files (${megabytes(scan.bytes)}) from ${o.hostDir} as a layer of the sandbox's image`);
  const ws = o.env.workspace.path.replace(/\/+$/, '').slice(1);
  const { tar, diffId } = await timed(d.logger, 'upload.layer_pack', () => collect(packHostDir(resolve(o.hostDir), scan.entries, [ws], parseOwner(o.env.workspace.owner)) as unknown as AsyncIterable<Buffer>));
  o.signal.throwIfAborted();
  const snapshotId = newId('snap');
  const labels = { ...d.storeLabels, 'berth.snapshot': snapshotId, 'berth.session': o.sessionId, 'berth.run': o.runId, 'berth.host': d.hostId };
  const layer = { tar, diffId, bytes: tar.length, entries: scan.entries.length + 1, whiteouts: 0 };
  // Straight into the engine: nothing names the image before the lease made from it, so the store
  // never needs the layer (writing, reading back and deleting the whole workspace there was ~0.15 s).
  const image = await timed(d.logger, 'upload.layer_load', () => d.snapshots.images.loadDirect({ parentImageId: parent, layer, labels, snapshotId, maxLayers: FLATTEN_DEPTH, signal: o.signal, beforeLoad: () => faultPoint('plan:upload-layer') }));
  if (!image) return undefined;
  return { snapshotId, imageId: image.imageId, layerBytes: tar.length, files, bytes: scan.bytes, skipped: scan.skipped };
}

/** An upload this big is announced before it starts. */
const BIG_UPLOAD_FILES = 5_000;
const BIG_UPLOAD_BYTES = 50 * 1024 * 1024;

const megabytes = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MB`;

/** The whole tar in memory (the engine's load takes it with a length), hashed as it is packed: its digest names the layer. */
async function collect(stream: AsyncIterable<Buffer>): Promise<{ tar: Buffer; diffId: string }> {
  const chunks: Buffer[] = [];
  const hash = createHash('sha256');
  for await (const c of stream) {
    chunks.push(c);
    hash.update(c);
  }
  return { tar: Buffer.concat(chunks), diffId: `sha256:${hash.digest('hex')}` };
}

/** The lease's record of the upload image: released when anything after the image fails (no record names the snapshot then). */
export async function dropUpload(snapshots: Snapshotter, lease: Lease | undefined, snapshotId: string): Promise<void> {
  if (lease && !lease.isReleased) await lease.release().catch(() => {});
  await snapshots.discard(snapshotId);
}
