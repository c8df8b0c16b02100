import type { ManifestIssue } from '../../environment';
import { BerthError } from '../errors';
import type { SecretDecl } from './resolve';

/** Who may receive secrets in a kind of run, and the names they go by (e.g. the tools of an agent host). */
export interface SecretConsumers {
  /** What one consumer is called in messages: `tool`, `step`. */
  noun: string;
  names: readonly string[];
}

/**
 * Refuses a manifest whose secrets name, in `to`, something that is not a consumer of this kind of
 * run. Such a name is almost always a typo or a plan step name, and the secret would silently
 * reach nobody; the error names each `secrets.N.to.M` with what was expected and found.
 */
export function checkSecretTargets(decls: readonly SecretDecl[], consumers: SecretConsumers, file: string): void {
  const issues: ManifestIssue[] = [];
  const known = consumers.names.join(', ') || 'none';
  decls.forEach((d, i) =>
    d.to.forEach((target, j) => {
      if (consumers.names.includes(target)) return;
      const path = `secrets.${i}.to.${j}`;
      const expected = `the name of a ${consumers.noun} (${known})`;
      issues.push({ path, expected, found: JSON.stringify(target), message: `${path}: expected ${expected}, found ${JSON.stringify(target)}` });
    }),
  );
  if (issues.length === 0) return;
  const head = `${file}: secrets given to something that is not a ${consumers.noun} (${issues.length} problem${issues.length === 1 ? '' : 's'}):`;
  throw new BerthError('manifest_invalid', [head, ...issues.map((i) => `  ${i.message}`)].join('\n'), { details: { file, issues } });
}
