import type { z } from 'zod';

/** One problem in a manifest, in terms a person editing the file can act on. */
export interface ManifestIssue {
  /** Dotted field path such as `resources.memoryMb` or `secrets.0.name`; `(root)` for the file itself. */
  path: string;
  expected: string;
  /** The value in the file (JSON, shortened), or `missing`. */
  found: string;
  message: string;
  /** For an unknown field: the known field it is probably a misspelling of. */
  suggestion?: string;
  /** How to write what was probably meant (a YAML scalar that was read as another type). */
  hint?: string;
}

/**
 * YAML reads an unquoted `true`, `no`, `1.10` or an empty value as a boolean, a number or null:
 * `run: true` is the boolean, not the command. Where text was expected, say how to keep it text.
 */
function yamlScalarHint(expected: string, raw: unknown): string | undefined {
  if (expected !== 'string') return undefined;
  if (raw === null) return 'an empty value is null in YAML: write the text, or "" for an empty one';
  if (typeof raw === 'boolean' || typeof raw === 'number') return `YAML reads an unquoted ${JSON.stringify(raw)} as a ${typeof raw}: quote it ("${String(raw)}") to keep it text`;
  return undefined;
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

/** Edit distance of two names, ignoring case (a misspelt field is usually a case or a letter off). */
function distance(a: string, b: string): number {
  const x = a.toLowerCase();
  const y = b.toLowerCase();
  let prev = Array.from({ length: y.length + 1 }, (_, j) => j);
  for (let i = 1; i <= x.length; i++) {
    const row = [i];
    for (let j = 1; j <= y.length; j++) row.push(Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (x[i - 1] === y[j - 1] ? 0 : 1)));
    prev = row;
  }
  return prev[y.length]!;
}

/** The known field closest to `name`, when one is close enough to be what was meant. */
export function closestField(name: string, known: readonly string[]): string | undefined {
  let best: { field: string; d: number } | undefined;
  for (const field of known) {
    const d = distance(name, field);
    if (d <= Math.max(1, Math.floor(Math.min(name.length, field.length) / 3)) && (!best || d < best.d)) best = { field, d };
  }
  return best?.field;
}

/** The field names a zod schema accepts at `path` (objects inside defaults, optionals, pipes and arrays). */
export function fieldsAt(schema: z.ZodType, path: readonly PathKey[]): string[] {
  let at: unknown = schema;
  const unwrap = () => {
    for (let guard = 0; guard < 20; guard++) {
      const def = (at as { def?: { type?: string; innerType?: unknown; in?: unknown } }).def;
      if (def?.type === 'default' || def?.type === 'optional' || def?.type === 'nullable' || def?.type === 'prefault') at = def.innerType;
      else if (def?.type === 'pipe') at = def.in;
      else return;
    }
  };
  unwrap();
  for (const key of path) {
    const def = (at as { def?: { type?: string; element?: unknown } }).def;
    if (def?.type === 'array') at = def.element;
    else if (def?.type === 'object') at = (at as { shape: Record<string, unknown> }).shape[String(key)];
    else return [];
    if (!at) return [];
    unwrap();
  }
  return (at as { def?: { type?: string } }).def?.type === 'object' ? Object.keys((at as { shape: Record<string, unknown> }).shape) : [];
}

/**
 * Turns zod issues into one ManifestIssue per problem. `found` is read from the raw input,
 * not from the issue, because zod omits missing values; a cross-field check on a field the
 * file left out reports the default that was checked instead.
 */
export function toManifestIssues(issues: readonly z.core.$ZodIssue[], input: unknown, schema?: z.ZodType): ManifestIssue[] {
  const out: ManifestIssue[] = [];
  for (const issue of issues) {
    if (issue.code === 'unrecognized_keys') {
      const known = schema ? fieldsAt(schema, issue.path) : [];
      for (const key of issue.keys) {
        const path = [...issue.path, key];
        const found = show(valueAt(input, path));
        const meant = closestField(key, known.filter((k) => !issue.keys.includes(k)));
        out.push({ path: dotted(path), expected: 'no such field', found, message: `unknown field ${dotted(path)}${meant ? `; did you mean \`${meant}\`?` : ''}`, ...(meant ? { suggestion: meant } : {}) });
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
    const hint = issue.code === 'invalid_type' ? yamlScalarHint(issue.expected, valueAt(input, issue.path)) : undefined;
    out.push({ path: dotted(issue.path), expected, found, message: `expected ${expected}, found ${found}${hint ? `; ${hint}` : ''}`, ...(hint ? { hint } : {}) });
  }
  return out;
}

/** `file: path: expected X, found Y` lines, one per issue. */
export function formatIssues(file: string, issues: readonly ManifestIssue[], what = 'environment manifest'): string {
  const head = `invalid ${what} ${file} (${issues.length} problem${issues.length === 1 ? '' : 's'}):`;
  return [head, ...issues.map((i) => i.expected === 'no such field' ? `  ${i.path}: unknown field (found ${i.found})${i.suggestion ? `; did you mean \`${i.suggestion}\`?` : ''}` : `  ${i.path}: expected ${i.expected}, found ${i.found}${i.hint ? `; ${i.hint}` : ''}`)].join('\n');
}
