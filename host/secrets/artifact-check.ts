import { BerthError, type ErrorIds } from '../errors';
import { hostSecretSource, type SecretDecl, type SecretSource } from './resolve';
import { declaredValues, findSecretsInChanges, type SnapshotCheckLease } from './snapshot-check';

/**
 * The snapshot check's scan (host/secrets/snapshot-check.ts), run over the files a step declared
 * as artifacts before a byte of them leaves the sandbox: a file holding any of the run's secret
 * values (raw, base64 or hex), or one the scan could not read, refuses the artifacts
 * (`artifact_holds_secret`, naming files and secrets, never values). `allowInWorkspace` does not
 * apply: artifacts are meant to be fetched and to travel, so a secret must never reach the store.
 */
export async function checkArtifactSecrets(
  lease: Pick<SnapshotCheckLease, 'exec'>,
  files: ReadonlyArray<{ path: string; real: string }>,
  decls: readonly SecretDecl[],
  o: { step: string; ids?: ErrorIds; signal?: AbortSignal; source?: SecretSource },
): Promise<void> {
  if (decls.length === 0 || files.length === 0) return;
  const ids = o.ids ?? {};
  const values = await declaredValues(decls, ids, o.source ?? hostSecretSource);
  const scan = { changes: async () => files.map((f) => ({ path: f.real, kind: 'added' as const })), exec: lease.exec.bind(lease) };
  const hits = await findSecretsInChanges(scan, values, o.signal);
  if (hits.length === 0) return;
  const rel = new Map(files.map((f) => [f.real, f.path]));
  const list = hits.map((h) => `${rel.get(h.path) ?? h.path} (${h.secret ?? 'unreadable, so not checked'})`).join(', ');
  throw new BerthError('artifact_holds_secret', `artifacts of step ${o.step} refused: ${list} hold${hits.length === 1 ? 's' : ''} a secret value; artifacts leave the sandbox, so they may hold none`, {
    ids,
    details: { files: hits.map((h) => rel.get(h.path) ?? h.path), secrets: [...new Set(hits.flatMap((h) => (h.secret ? [h.secret] : [])))] },
  });
}
