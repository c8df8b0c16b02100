import { createHash } from 'node:crypto';
import { canonicalJson as environmentCanonical } from '../../environment';

/**
 * The same text as environment's canonicalJson (sorted keys at every depth, no whitespace), produced
 * by the native serialiser with a replacer that hands it each object's members in sorted order
 * (a record of 10,000 entries is serialised once per export; a hand-written walk cost 5x the rows'
 * own serialisation). Values come from JSON, so there are no non-finite numbers to refuse. A unit
 * test holds the two implementations equal.
 */
export function canonicalJson(value: unknown): string {
  // Most values (entry bodies) already have their keys in order: the native serialiser without a
  // replacer is several times faster, and a walk that only compares keys costs less than the
  // replacer's call per member (profiled in the record bench).
  if (keysSorted(value, 0)) return JSON.stringify(value) ?? 'null';
  try {
    return JSON.stringify(value, sortedMembers) ?? 'null';
  } catch (err) {
    if (err !== INDEX_KEYS) throw err;
    return walk(value) ?? 'null';
  }
}

/**
 * An object with an integer-like key ("0", "9", "10") cannot be handed to the native serialiser in
 * sorted order: JavaScript always lists such keys first, in numeric order ("9" before "10", both
 * before "-1" or " "), whatever order they were inserted in. The replacer throws this to hand the
 * whole value to {@link walk}.
 */
const INDEX_KEYS = Symbol('index keys');
const isIndexKey = (k: string) => /^(0|[1-9]\d{0,9})$/.test(k) && Number(k) < 2 ** 32 - 1;

/** The canonical text built by hand, with JSON.stringify's rules (toJSON, dropped undefined members, null for non-finite numbers). */
function walk(v: unknown, key = ''): string | undefined {
  if (v !== null && typeof v === 'object' && typeof (v as { toJSON?: unknown }).toJSON === 'function') v = (v as { toJSON(k: string): unknown }).toJSON(key);
  if (v === null || typeof v !== 'object') return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map((x, i) => walk(x, String(i)) ?? 'null').join(',')}]`;
  const parts: string[] = [];
  for (const k of Object.keys(v).sort()) {
    const text = walk((v as Record<string, unknown>)[k], k);
    if (text !== undefined) parts.push(`${JSON.stringify(k)}:${text}`);
  }
  return `{${parts.join(',')}}`;
}

/** Whether every object in `v` lists its keys in canonical order (false too for a value too deep to check cheaply). */
function keysSorted(v: unknown, depth: number): boolean {
  if (v === null || typeof v !== 'object') return true;
  if (depth > 32) return false;
  if (Array.isArray(v)) {
    for (const x of v) if (!keysSorted(x, depth + 1)) return false;
    return true;
  }
  // toJSON would change what is serialised; the replacer path handles it as before.
  if (typeof (v as { toJSON?: unknown }).toJSON === 'function') return false;
  let prev: string | undefined;
  for (const k in v) {
    if (!Object.prototype.hasOwnProperty.call(v, k)) return false;
    if (prev !== undefined && prev > k) return false;
    prev = k;
    if (!keysSorted((v as Record<string, unknown>)[k], depth + 1)) return false;
  }
  return true;
}

function sortedMembers(this: unknown, _key: string, v: unknown): unknown {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return v;
  const keys = Object.keys(v);
  let sorted = true;
  for (let i = 1; i < keys.length; i++) if (keys[i - 1]! > keys[i]!) { sorted = false; break; }
  if (sorted) return v;
  // Integer-like keys come first in JavaScript (see INDEX_KEYS), so the first key says whether there are any.
  if (isIndexKey(keys[0]!)) throw INDEX_KEYS;
  keys.sort();
  const out: Record<string, unknown> = {};
  for (const k of keys) out[k] = (v as Record<string, unknown>)[k];
  return out;
}

export { environmentCanonical };

/**
 * The canonical form of a record (the text its digest covers): JSON with the object keys sorted at
 * every depth (by UTF-16 code unit, as JavaScript compares strings), no whitespace, array order
 * kept, `undefined` members dropped, numbers as JSON.stringify writes them, and the top-level
 * `digest` member left out. The same data always gives the same bytes, whatever order or
 * indentation the file was written with.
 */
export function canonicalWithout(doc: Record<string, unknown>, omit: string, serialised: Record<string, string> = {}): { text: string; parts: Array<[string, string]> } {
  const { parts } = canonicalParts(doc, omit, serialised);
  return { text: `{${parts.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',')}}`, parts };
}

/** The canonical text of each member but `omit`, in canonical (sorted) order. */
function canonicalParts(doc: Record<string, unknown>, omit: string, serialised: Record<string, string>): { parts: Array<[string, string]> } {
  // `serialised`: members whose canonical text the caller already built (the entries, whose
  // bodies are serialised once, both to size them and for the record).
  const parts = Object.keys(doc)
    .filter((k) => k !== omit && doc[k] !== undefined)
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
    .map((k): [string, string] => [k, serialised[k] ?? canonicalJson(doc[k])]);
  return { parts };
}

/** `sha256:` + hex sha256 of a text's UTF-8 bytes. */
export const sha256 = (text: string): string => `sha256:${createHash('sha256').update(text).digest('hex')}`;

/**
 * The record's text as written: its canonical form with the `digest` member placed at its sorted
 * position, so the file itself is canonical and each member is serialised only once.
 */
export function sealRecord(doc: Record<string, unknown>, serialised: Record<string, string> = {}): { text: string; digest: string } {
  const { parts } = canonicalParts(doc, 'digest', serialised);
  // Hashed member by member: the canonical text is never built as a whole, only the file's text
  // (a 10,000-entry record is megabytes; one copy less, and less for the collector).
  const hash = createHash('sha256').update('{');
  parts.forEach(([k, v], i) => hash.update(`${i > 0 ? ',' : ''}${JSON.stringify(k)}:`).update(v));
  const digest = `sha256:${hash.update('}').digest('hex')}`;
  const all = [...parts, ['digest', JSON.stringify(digest)] as [string, string]].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return { text: `{${all.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',')}}\n`, digest };
}

/** The digest a record's members say it should carry (recomputed; never read from the record). */
export const recordDigest = (doc: Record<string, unknown>): string => sha256(canonicalWithout(doc, 'digest').text);

/**
 * The digest an earlier build (before integer-like keys were ordered by code unit) computed: the
 * same members with each object's keys as JavaScript lists them after sorting ("9" before "10").
 * Only a record holding such keys has a different one; the import accepts either, so records
 * exported before the fix still import (their content is still covered by a digest).
 */
export const legacyRecordDigest = (doc: Record<string, unknown>): string => {
  const members = Object.fromEntries(Object.keys(doc).filter((k) => k !== 'digest' && doc[k] !== undefined).sort().map((k) => [k, doc[k]]));
  return sha256(JSON.stringify(members, legacyMembers));
};

function legacyMembers(_key: string, v: unknown): unknown {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return v;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(v).sort()) out[k] = (v as Record<string, unknown>)[k];
  return out;
}
