import { sessionSandboxDocId } from '../agent';
import { forkedFrom } from '../fork';
import { isFinalRunState, type Run, type Snapshot } from '../model';
import { sandboxDocId, type SandboxPointer } from '../run-sandbox';
import type { HostRuntime } from '../runtime/host-runtime';
import type { HostParts } from './assemble';

/** What a resume found of the run's sandbox before it continued. */
export interface SandboxFound {
  state: 'alive' | 'gone' | 'none';
  leaseId: string | null;
  containerId: string | null;
  /** Why it cannot be used (gone), in the verifier's words. */
  reason?: string;
  /** The snapshot the pointer names: what a gone sandbox is restored from. */
  snapshotId: string | null;
}

/** What the resume did with it: continued in it, restored one from a snapshot, or leased a new one; `stopped`: a cancel carried out stopped what still ran in it (the run's end then released it). */
export interface SandboxDid {
  action: 'continued' | 'stopped' | 'restored' | 'new' | 'none';
  leaseId: string | null;
  snapshotId?: string;
}

/** A plan run's own sandbox pointer, or an agent run's session pointer (its session keeps one sandbox across runs); other kinds have none. */
async function pointerOf(p: HostParts, rt: HostRuntime, run: Run): Promise<SandboxPointer | null> {
  const id = run.kind === 'plan' ? sandboxDocId(run.id) : run.kind === 'agent' ? sessionSandboxDocId(run.sessionId) : null;
  const doc = id ? await p.store.getDocument(id) : undefined;
  return doc ? (rt.documents.rebuild(doc) as unknown as SandboxPointer) : null;
}

/** The run's sandbox as this host finds it before taking the run (plan and agent runs; others have none to report). */
export async function sandboxFound(p: HostParts, rt: HostRuntime, run: Run): Promise<SandboxFound> {
  const ptr = await pointerOf(p, rt, run);
  if (!ptr?.leaseId) return { state: 'none', leaseId: null, containerId: null, snapshotId: ptr?.snapshotId ?? null };
  const record = await p.store.getLease(ptr.leaseId);
  const containerId = record?.containerId || null;
  const usable = await rt.planSandbox.usable(ptr).catch((err: unknown) => ({ ok: false as const, reason: `it could not be checked: ${err instanceof Error ? err.message : String(err)}` }));
  return usable.ok
    ? { state: 'alive', leaseId: ptr.leaseId, containerId, snapshotId: ptr.snapshotId }
    : { state: 'gone', leaseId: ptr.leaseId, containerId, reason: usable.reason, snapshotId: ptr.snapshotId };
}

/**
 * The snapshots a drive of `run` can restore from, as they are before this host drives it: its
 * session's, and a fork's fork point (its parent's snapshot, in another session). A snapshot the
 * drive takes itself (the upload of a run killed before its first commit) is the image of the lease
 * it just made, which is a new sandbox, not a restore.
 */
export async function snapshotsBefore(p: HostParts, run: Run): Promise<ReadonlyMap<string, Snapshot>> {
  const out = new Map((await p.store.listSnapshots({ sessionId: run.sessionId })).map((s) => [s.id, s] as const));
  const from = await forkedFrom(p.store, run);
  const point = from && !out.has(from.snapshotId) ? await p.store.getSnapshot(from.snapshotId) : undefined;
  if (point) out.set(point.id, point);
  return out;
}

/** What became of the sandbox: the pointer's lease after the drive, and the snapshot its image is (when it was restored). */
export async function sandboxDid(p: HostParts, rt: HostRuntime, run: Run, found: SandboxFound, before: ReadonlyMap<string, Snapshot>): Promise<SandboxDid> {
  const ptr = await pointerOf(p, rt, run);
  if (!ptr?.leaseId) return { action: 'none', leaseId: null };
  if (ptr.leaseId === found.leaseId) return { action: found.state === 'alive' ? (run.state === 'cancelling' ? 'stopped' : 'continued') : 'none', leaseId: ptr.leaseId };
  const lease = await p.store.getLease(ptr.leaseId);
  // A step that changed nothing shares its image with the one before: the snapshot the pointer named wins.
  const candidates = lease ? [...before.values()].filter((s) => s.imageId === lease.imageDigest) : [];
  const snap = candidates.find((s) => s.id === found.snapshotId) ?? candidates.at(-1);
  return snap ? { action: 'restored', leaseId: ptr.leaseId, snapshotId: snap.id } : { action: 'new', leaseId: ptr.leaseId };
}

/** One line each for the operator. A run that already ended runs nothing again: its sandbox is not restored, whatever is left of it. */
/** `leftovers`: the live tasks a stopped host left in the run when it has ended (the resume settles them). */
export const foundLine = (f: SandboxFound, run: Pick<Run, 'state'>, leftovers = 0) =>
  run.state === 'cancelling'
    ? cancelFoundLine(f)
    : isFinalRunState(run.state)
    ? leftovers
      ? `it already ended (${run.state}) with ${leftovers === 1 ? '1 task' : `${leftovers} tasks`} a stopped host left live: settling ${leftovers === 1 ? 'it' : 'them'}; nothing else is run again and no sandbox is restored`
      : `it already ended (${run.state}): nothing is run again and no sandbox is restored`
    : f.state === 'alive'
    ? `found the sandbox alive (lease ${f.leaseId}, container ${f.containerId?.slice(0, 12) ?? '-'}): continuing in it`
    : f.state === 'gone'
      ? `found the sandbox gone (${f.reason}): ${f.snapshotId ? `restoring it from snapshot ${f.snapshotId}, or asking when that cannot be done` : 'no snapshot to restore it from'}`
      : 'no sandbox yet';
/** A cancel carried out runs nothing again: it stops what still runs in a live sandbox and restores none. */
const cancelFoundLine = (f: SandboxFound) =>
  f.state === 'alive'
    ? `found the sandbox alive (lease ${f.leaseId}, container ${f.containerId?.slice(0, 12) ?? '-'}): stopping what still runs in it`
    : f.state === 'gone'
      ? `found the sandbox gone (${f.reason}): a cancel restores nothing`
      : 'no sandbox yet';

/** How the operator's command reads in the first line: a resume, or the carrying out of a committed cancel. */
export const resumeVerb = (runId: string, run: Pick<Run, 'state'>) => (run.state === 'cancelling' ? `carrying out the cancel of run ${runId}` : `resuming run ${runId} (${run.state})`);

/** Nothing for a sandbox a cancel only stopped: the found line said so. */
export const didLine = (d: SandboxDid) =>
  d.action === 'restored' ? `sandbox restored from snapshot ${d.snapshotId} (lease ${d.leaseId})` : d.action === 'continued' ? `continued in the same sandbox (lease ${d.leaseId})` : d.action === 'new' ? `sandbox leased anew (lease ${d.leaseId})` : '';
