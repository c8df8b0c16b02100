import { resolve } from 'node:path';
import { currentArtifacts, fetchArtifacts, type BlobState } from '../../artifacts';
import { BerthError } from '../../errors';
import type { CliContext } from '../context';
import { emit, table } from '../output';
import { getRunOrThrow } from './runs';

/**
 * `berth artifacts RUN [--out DIR]`: the run's artifacts as they stand (a step re-run supersedes
 * what its earlier execution committed), each checked against the store (present, missing,
 * altered: re-hashed). With `--out`, copies them to DIR/<path>, hashing on the way; a missing or
 * altered one is named, not written, and the command exits 1. Reads only: it owns no run.
 */
export async function artifactsCommand(ctx: CliContext, runId: string, out?: string): Promise<number> {
  await getRunOrThrow(ctx.store, runId);
  const records = currentArtifacts(await ctx.store.listArtifacts(runId));
  const listed: Array<{ path: string; step: string; stepIndex: number; generation: number; size: number; sha256: string; status: BlobState }> = [];
  for (const a of records) {
    listed.push({ path: a.path, step: a.step, stepIndex: a.stepIndex, generation: a.generation, size: a.sizeBytes, sha256: a.sha256, status: await ctx.artifacts.check(a.sha256, a.sizeBytes) });
  }
  if (out === undefined) {
    emit(ctx.json, { runId, store: ctx.artifacts.location, artifacts: listed }, () =>
      listed.length === 0
        ? `run ${runId} has no artifacts`
        : table([['PATH', 'STEP', 'SIZE', 'SHA256', 'STATUS'], ...listed.map((a) => [a.path, a.step, String(a.size), a.sha256.slice(0, 16), a.status])]),
    );
    return 0;
  }
  const fetched = await fetchArtifacts(ctx.artifacts, records, out);
  const bad = fetched.filter((f) => f.status !== 'fetched');
  emit(ctx.json, { runId, store: ctx.artifacts.location, out: resolve(out), artifacts: listed, fetched }, () =>
    fetched.length === 0 ? `run ${runId} has no artifacts: nothing written to ${resolve(out)}` : [`fetched ${fetched.length - bad.length} of ${fetched.length} artifact(s) to ${resolve(out)}`, ...bad.map((b) => `  ${b.path}: ${b.status} in the artifact store ${ctx.artifacts.location}`)].join('\n'),
  );
  if (bad.length) {
    throw new BerthError('artifact_unavailable', `${bad.length} artifact(s) of run ${runId} could not be fetched with their committed digest: ${bad.map((b) => `${b.path} (${b.status})`).join(', ')}`, { ids: { runId } });
  }
  return 0;
}
