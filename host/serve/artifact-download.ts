import { Readable } from 'node:stream';
import type { Context } from 'hono';
import { hashing } from '../artifacts';
import { BerthError } from '../errors';
import type { ServeDeps } from './deps';

/**
 * Streams one committed artifact of `runId` from the artifact store. The blob is checked against
 * its committed sha256 and size before the first byte is sent (a missing or altered blob answers
 * 409), and hashed again on the way out: bytes that changed after the check end the response with
 * an error instead of completing, so a browser never saves a download that looks whole but is not.
 */
export async function downloadArtifact(c: Context, deps: ServeDeps, runId: string, artifactId: string): Promise<Response> {
  const a = (await deps.store.listArtifacts(runId)).find((x) => x.id === artifactId);
  if (!a) throw new BerthError('artifact_not_found', `run ${runId} has no artifact ${artifactId}`, { ids: { runId } });
  const state = await deps.artifacts.check(a.sha256, a.sizeBytes);
  if (state !== 'present') return c.text(`artifact_${state}: ${a.path} (sha256 ${a.sha256}) is ${state} in the artifact store`, 409);
  const source = await deps.artifacts.open(a.sha256);
  const checked = hashing({ sha256: a.sha256, size: a.sizeBytes, error: (got) => new Error(`artifact ${a.path} changed while it was sent (sha256:${got.sha256}, ${got.size} bytes)`) });
  source.on('error', (err) => checked.destroy(err));
  source.pipe(checked);
  const name = (a.path.split('/').pop() || 'artifact').replace(/[^A-Za-z0-9._-]/g, '_');
  return new Response(Readable.toWeb(checked) as ReadableStream, {
    headers: {
      'content-type': 'application/octet-stream',
      'content-length': String(a.sizeBytes),
      'content-disposition': `attachment; filename="${name}"`,
      'x-berth-sha256': a.sha256,
    },
  });
}
