/**
 * Just enough semver for kernel compatibility: versions `x.y.z[-pre][+build]`, comparators
 * `>=, >, <=, <, =` (or a bare version, meaning `=`), `^x.y.z`, and spaces as "and". No `||`,
 * no `~`, no wildcards: manifests should state ranges plainly. Prereleases compare by semver
 * precedence and are not otherwise special.
 */

/** A semver version: `x.y.z` with optional `-prerelease` and `+build`. */
export const VERSION = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$/;

interface Version {
  major: number;
  minor: number;
  patch: number;
  pre: string[];
}

type Op = '>=' | '>' | '<=' | '<' | '=';
interface Comparator {
  op: Op;
  version: Version;
}

function parseVersion(text: string): Version | undefined {
  const m = VERSION.exec(text);
  if (!m) return undefined;
  return { major: Number(m[1]), minor: Number(m[2]), patch: Number(m[3]), pre: m[4] ? m[4].split('.') : [] };
}

/** True when `text` is a semver version such as `0.1.0` or `1.2.3-rc.1`. */
export function isVersion(text: string): boolean {
  return parseVersion(text) !== undefined;
}

function comparePre(a: string[], b: string[]): number {
  // A version without a prerelease ranks above any prerelease of it.
  if (a.length === 0 || b.length === 0) return b.length - a.length;
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const x = a[i];
    const y = b[i];
    if (x === undefined) return -1;
    if (y === undefined) return 1;
    if (x === y) continue;
    const xn = /^\d+$/.test(x);
    const yn = /^\d+$/.test(y);
    if (xn && yn) return Number(x) - Number(y);
    if (xn !== yn) return xn ? -1 : 1;
    return x < y ? -1 : 1;
  }
  return 0;
}

function compare(a: Version, b: Version): number {
  return a.major - b.major || a.minor - b.minor || a.patch - b.patch || comparePre(a.pre, b.pre);
}

function parseComparators(token: string): Comparator[] | undefined {
  if (token.startsWith('^')) {
    const v = parseVersion(token.slice(1));
    if (!v) return undefined;
    const upper: Version =
      v.major > 0 ? { major: v.major + 1, minor: 0, patch: 0, pre: [] }
      : v.minor > 0 ? { major: 0, minor: v.minor + 1, patch: 0, pre: [] }
      : { major: 0, minor: 0, patch: v.patch + 1, pre: [] };
    return [{ op: '>=', version: v }, { op: '<', version: upper }];
  }
  const m = /^(>=|<=|>|<|=)?(.*)$/.exec(token);
  const version = parseVersion(m?.[2] ?? '');
  if (!m || !version) return undefined;
  return [{ op: (m[1] ?? '=') as Op, version }];
}

function parseRange(range: string): Comparator[] | undefined {
  // Operators may be written apart from their version (`>= 0.1.0`); join them first.
  const tokens = range.trim().replace(/(>=|<=|>|<|=|\^)\s+/g, '$1').split(/\s+/);
  if (tokens.length === 0 || tokens[0] === '') return undefined;
  const out: Comparator[] = [];
  for (const token of tokens) {
    const cs = parseComparators(token);
    if (!cs) return undefined;
    out.push(...cs);
  }
  return out;
}

/** True when `range` is a range this checker understands. */
export function isRange(range: string): boolean {
  return parseRange(range) !== undefined;
}

/**
 * True when `version` satisfies every comparator of `range`. Throws a TypeError for a version or
 * range it cannot read, because "not compatible" and "unreadable" need different answers.
 */
export function satisfiesRange(version: string, range: string): boolean {
  const v = parseVersion(version);
  if (!v) throw new TypeError(`not a semver version: "${version}"`);
  const comparators = parseRange(range);
  if (!comparators) throw new TypeError(`not a version range: "${range}"`);
  return comparators.every(({ op, version: bound }) => {
    const c = compare(v, bound);
    return op === '>=' ? c >= 0 : op === '>' ? c > 0 : op === '<=' ? c <= 0 : op === '<' ? c < 0 : c === 0;
  });
}
