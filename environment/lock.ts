import { isMap, parseDocument } from 'yaml';
import { BerthError } from '../host/errors';
import { DIGEST } from './field-checks';
import { formatIssues, type ManifestIssue } from './issues';
import { detectFormat, readDocument } from './read-document';

function invalid(file: string, issue: ManifestIssue): BerthError {
  return new BerthError('manifest_invalid', formatIssues(file, [issue]), { details: { file, issues: [issue] } });
}

function withDigestJson(text: string, file: string, digest: string): string {
  const data = readDocument(text, file);
  const image = (data as { image?: unknown } | null)?.image;
  if (image === null || typeof image !== 'object' || Array.isArray(image)) {
    throw invalid(file, { path: 'image', expected: 'an object', found: JSON.stringify(image) ?? 'missing', message: 'image must be an object to pin a digest' });
  }
  // Rebuilt so that digest sits right after ref, where a reader looks for it.
  const { ref, digest: _old, ...rest } = image as Record<string, unknown>;
  (data as Record<string, unknown>).image = { ...(ref === undefined ? {} : { ref }), digest, ...rest };
  return JSON.stringify(data, null, 2) + '\n';
}

function withDigestYaml(text: string, file: string, digest: string): string {
  readDocument(text, file); // throws manifest_syntax with a position
  const doc = parseDocument(text, { uniqueKeys: true });
  const image = doc.get('image', true);
  if (!isMap(image)) {
    throw invalid(file, { path: 'image', expected: 'a mapping', found: image === undefined ? 'missing' : String(doc.toJS()?.image), message: 'image must be a mapping to pin a digest' });
  }
  image.set('digest', digest);
  // lineWidth 0: never re-fold the user's long lines while adding one of ours.
  return doc.toString({ lineWidth: 0 });
}

/**
 * Returns the manifest text with `image.digest` set (added or replaced), for `berth env lock`.
 * YAML keeps its comments and key order; JSON is re-printed with a 2-space indent.
 */
export function withImageDigest(text: string, file: string, digest: string): string {
  if (!DIGEST.test(digest)) {
    throw invalid(file, { path: 'image.digest', expected: 'sha256: followed by 64 lowercase hex digits', found: JSON.stringify(digest), message: 'not an image digest' });
  }
  return detectFormat(text, file) === 'json' ? withDigestJson(text, file, digest) : withDigestYaml(text, file, digest);
}
