import type { z } from 'zod';

/** One problem in a manifest, in terms a person editing the file can act on. */
export interface ManifestIssue {
  /** Dotted field path such as `resources.memoryMb` or `secrets.0.name`; `(root)` for the file itself. */
  path: string;
  expected: string;
  /** The value in the file (JSON, shortened), or `missing`. */
  found: string;
  message: string;
}

const MISSING = Symbol('missing');
type PathKey = PropertyKey;

function dotted(path: readonly PathKey[]): string {
  return path.length === 0 ? '(root)' : path.map(String).join('.');
}

function valueAt(root: unknown, path: readonly PathKey[]): unknown {
  let at: unknown = root;
  for (const key of path) {
    if (at === null || typeof at !== 'object' || !Object.hasOwn(at, key)) return MISSING;
    at = (at as Record<PropertyKey, unknown>)[key];
  }
  return at;
}

function show(value: unknown): string {
  if (value === MISSING || value === undefined) return 'missing';
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

function bound(issue: { minimum?: unknown; maximum?: unknown; inclusive?: boolean; origin?: string }, low: boolean): string {
  const limit = String(low ? issue.minimum : issue.maximum);
  const op = low ? (issue.inclusive ? '>=' : '>') : issue.inclusive ? '<=' : '<';
  if (issue.origin === 'string') return `a string of ${op} ${limit} characters`;
  if (issue.origin === 'array') return `a list of ${op} ${limit} items`;
  return `a number ${op} ${limit}`;
}

function expectedOf(issue: z.core.$ZodIssue): string {
  switch (issue.code) {
    case 'invalid_type':
      return issue.expected === 'int' ? 'an integer' : `a value of type ${issue.expected}`;
    case 'too_small':
      return bound(issue, true);
    case 'too_big':
      return bound(issue, false);
    case 'invalid_value':
      return `one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`;
    default:
      // Our own checks word their messages as the expectation itself.
      return issue.message;
  }
}

/**
 * Turns zod issues into one ManifestIssue per problem. `found` is read from the raw input,
 * not from the issue, because zod omits missing values; a cross-field check on a field the
 * file left out reports the default that was checked instead.
 */
export function toManifestIssues(issues: readonly z.core.$ZodIssue[], input: unknown): ManifestIssue[] {
  const out: ManifestIssue[] = [];
  for (const issue of issues) {
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) {
        const path = [...issue.path, key];
        const found = show(valueAt(input, path));
        out.push({ path: dotted(path), expected: 'no such field', found, message: `unknown field ${dotted(path)}` });
      }
      continue;
    }
    let found = show(valueAt(input, issue.path));
    const last = issue.path.at(-1);
    if (found === 'missing' && issue.code === 'custom' && last !== undefined) {
      const parsed = valueAt(issue.input, [last]);
      if (parsed !== MISSING) found = `${show(parsed)} (default)`;
    }
    const expected = expectedOf(issue);
    out.push({ path: dotted(issue.path), expected, found, message: `expected ${expected}, found ${found}` });
  }
  return out;
}

/** `file: path: expected X, found Y` lines, one per issue. */
export function formatIssues(file: string, issues: readonly ManifestIssue[], what = 'environment manifest'): string {
  const head = `invalid ${what} ${file} (${issues.length} problem${issues.length === 1 ? '' : 's'}):`;
  return [head, ...issues.map((i) => i.expected === 'no such field' ? `  ${i.path}: unknown field (found ${i.found})` : `  ${i.path}: expected ${i.expected}, found ${i.found}`)].join('\n');
}
