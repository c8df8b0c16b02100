import { createHash } from 'node:crypto';
import { canonicalJson } from '../../environment';

export { canonicalJson };

/**
 * The canonical form of a record (the text its digest covers): JSON with the object keys sorted at
 * every depth (by UTF-16 code unit, as JavaScript compares strings), no whitespace, array order
 * kept, `undefined` members dropped, numbers as JSON.stringify writes them, and the top-level
 * `digest` member left out. The same data always gives the same bytes, whatever order or
 * indentation the file was written with.
 */
export function canonicalWithout(doc: Record<string, unknown>, omit: string): { text: string; parts: Array<[string, string]> } {
  const parts = Object.keys(doc)
    .filter((k) => k !== omit && doc[k] !== undefined)
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
    .map((k): [string, string] => [k, canonicalJson(doc[k])]);
  return { text: `{${parts.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',')}}`, parts };
}

/** `sha256:` + hex sha256 of a text's UTF-8 bytes. */
export const sha256 = (text: string): string => `sha256:${createHash('sha256').update(text).digest('hex')}`;

/**
 * The record's text as written: its canonical form with the `digest` member placed at its sorted
 * position, so the file itself is canonical and each member is serialised only once.
 */
export function sealRecord(doc: Record<string, unknown>): { text: string; digest: string } {
  const { text, parts } = canonicalWithout(doc, 'digest');
  const digest = sha256(text);
  const all = [...parts, ['digest', JSON.stringify(digest)] as [string, string]].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return { text: `{${all.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',')}}\n`, digest };
}

/** The digest a record's members say it should carry (recomputed; never read from the record). */
export const recordDigest = (doc: Record<string, unknown>): string => sha256(canonicalWithout(doc, 'digest').text);
