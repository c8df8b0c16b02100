import type Dockerode from 'dockerode';
import { isEngineUnreachable, isNotFound } from './engine-errors';
import { LABEL } from './labels';
import type { LeaseRecord } from './lease-records';

/** Why a leased sandbox cannot be resumed as is. */
export type VerifyFailure = 'container_missing' | 'container_stopped' | 'image_mismatch' | 'fingerprint_mismatch' | 'engine_unreachable' | 'stale_epoch';

/** The answer of {@link verifyLease}: a value, never an exception, for every expected failure. */
export type VerifyResult = { ok: true } | { ok: false; code: VerifyFailure; reason: string };

/**
 * Whether the sandbox a lease record names can be resumed as is: the container exists and runs,
 * runs the recorded image id, and was created for the recorded environment fingerprint.
 */
export async function verifyLease(docker: Dockerode, record: LeaseRecord, opts: { minEpoch?: number } = {}): Promise<VerifyResult> {
  // An intent whose container was never named: nothing to resume.
  if (record.containerId === '') return { ok: false, code: 'container_missing', reason: `lease ${record.id} never got a container recorded` };
  let info: Dockerode.ContainerInspectInfo;
  try {
    info = await docker.getContainer(record.containerId).inspect();
  } catch (err) {
    if (isNotFound(err)) return { ok: false, code: 'container_missing', reason: `container ${record.containerId} does not exist` };
    if (isEngineUnreachable(err)) return { ok: false, code: 'engine_unreachable', reason: `Docker engine unreachable: ${(err as Error).message}` };
    throw err;
  }
  if (!info.State.Running) {
    return { ok: false, code: 'container_stopped', reason: `container ${record.containerId} is ${info.State.Status} (exit ${info.State.ExitCode})` };
  }
  if (info.Image !== record.imageDigest) {
    return { ok: false, code: 'image_mismatch', reason: `container runs image ${info.Image}, the lease recorded ${record.imageDigest}` };
  }
  const fingerprint = info.Config.Labels?.[LABEL.fingerprint];
  if (fingerprint !== record.envFingerprint) {
    return {
      ok: false,
      code: 'fingerprint_mismatch',
      reason: `container was created for environment ${fingerprint ?? '(none)'}, the lease recorded ${record.envFingerprint}`,
    };
  }
  // Leased under an older owner of the run (issue 15): that host may still act on it, so it is never used.
  // The record's epoch wins over the label when a newer owner adopted the sandbox (labels cannot change).
  const label = info.Config.Labels?.[LABEL.epoch];
  const epoch = Math.max(label === undefined ? -1 : Number(label), record.epoch ?? -1);
  if (opts.minEpoch !== undefined && epoch >= 0 && epoch < opts.minEpoch) {
    return { ok: false, code: 'stale_epoch', reason: `container ${record.containerId} was leased under ownership epoch ${epoch}; the run's owner is at epoch ${opts.minEpoch}` };
  }
  return { ok: true };
}
