import { createHash } from 'node:crypto';
import type { Environment } from './schema';

/**
 * JSON with object keys sorted at every depth and no whitespace, so equal data always gives
 * equal text. Array order is kept (it is meaningful); `undefined` members are dropped, as
 * JSON.stringify does. Throws a TypeError for values JSON cannot represent faithfully.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value === 'boolean' || typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new TypeError(`canonicalJson: non-finite number ${value}`);
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : canonicalJson(v))).join(',')}]`;
  if (typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  throw new TypeError(`canonicalJson: cannot represent a ${typeof value}`);
}

/**
 * The environment fingerprint: `sha256:` + hex sha256 of the canonical JSON of the parsed
 * manifest. Because it hashes the parsed value with defaults applied, two manifests that mean
 * the same thing share a fingerprint whatever their format (YAML or JSON), key order, comments,
 * or whether a default was written out. Any change of meaning, such as a resource limit or the
 * pinned image digest, changes it.
 */
export function fingerprint(env: Environment): string {
  return `sha256:${createHash('sha256').update(canonicalJson(env)).digest('hex')}`;
}
