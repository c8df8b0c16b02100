import { z } from 'zod';
import { BerthError } from '../errors';
import type { Json, RunVersions } from '../model';

/** The versions in force on a run and on each of its transitions, as both stores keep them. */
export const RunVersionsSchema: z.ZodType<RunVersions> = z.strictObject({
  kernel: z.string().optional(),
  envFingerprint: z.string().optional(),
  imageDigest: z.string().optional(),
});

/** Where a stored value came from, for the error that names it. */
export interface StoredAt {
  table: string;
  rowId: string;
  field: string;
}

/** A stored row whose value does not have the shape this build reads: `store_row_invalid`, naming the table, row and field. */
export function storedRowInvalid(at: StoredAt, why: string, cause?: unknown): BerthError {
  return new BerthError('store_row_invalid', `${at.table} row ${at.rowId}: ${at.field} ${why}`, {
    cause,
    details: { table: at.table, rowId: at.rowId, field: at.field },
  });
}

/**
 * Decodes a JSON column whose shape is the writer's business (a task kind's input and checkpoint,
 * an entry body, an effect's intent and receipt: defineTask and the tools parse those at their own
 * boundary). SQL NULL reads as JSON null. Parsing is the whole check: JSON.parse produces only
 * JSON values (what `JsonSchema` accepts), so walking the result would confirm nothing and cost a
 * copy of every body and checkpoint read.
 */
export function decodeJson(text: unknown, at: StoredAt): Json {
  if (text === null || text === undefined) return null;
  if (typeof text !== 'string') throw storedRowInvalid(at, `is ${typeof text}, not JSON text`);
  try {
    return JSON.parse(text);
  } catch (err) {
    throw storedRowInvalid(at, `is not JSON (${(err as Error).message})`, err);
  }
}

/** Decodes a JSON column with a shape of the store's own (a wait, a task error, run versions), checked against `schema`. */
export function decodeShaped<T>(text: unknown, schema: z.ZodType<T>, at: StoredAt): T {
  const parsed = schema.safeParse(decodeJson(text, at));
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const path = issue.path.length > 0 ? ` at ${issue.path.join('.')}` : '';
  throw storedRowInvalid(at, `does not hold what this build reads${path}: ${issue.message}`, parsed.error);
}

/** Decodes one column that holds one of a fixed set of values (a status, a policy). */
export function decodeOneOf<const T extends string>(value: unknown, allowed: readonly T[], at: StoredAt): T {
  if (typeof value === 'string' && (allowed as readonly string[]).includes(value)) return value as T;
  throw storedRowInvalid(at, `holds ${JSON.stringify(value)}, not one of ${allowed.join(', ')}`);
}

/**
 * The decoder of one row: `json`, `shaped` and `oneOf` name the table, the row's id and the column
 * in any error.
 */
export function storedRow(table: string, row: Record<string, unknown>, rowId: string) {
  return {
    json(column: string): Json {
      return decodeJson(row[column], { table, rowId, field: column });
    },
    shaped<T>(column: string, schema: z.ZodType<T>): T {
      return decodeShaped(row[column], schema, { table, rowId, field: column });
    },
    oneOf<const T extends string>(column: string, allowed: readonly T[]): T {
      return decodeOneOf(row[column], allowed, { table, rowId, field: column });
    },
    /** As {@link oneOf}, SQL NULL allowed. */
    oneOfOrNull<const T extends string>(column: string, allowed: readonly T[]): T | null {
      return row[column] === null || row[column] === undefined ? null : decodeOneOf(row[column], allowed, { table, rowId, field: column });
    },
  };
}
