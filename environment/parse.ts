import { readFile } from 'node:fs/promises';
import type { z } from 'zod';
import { BerthError } from '../host/errors';
import { formatIssues, toManifestIssues } from './issues';
import { readDocument } from './read-document';
import { applyLockFile } from './lock-file';
import { EnvironmentSchema, type Environment } from './schema';

/**
 * Parses and validates manifest text. `file` names the source in errors and picks the format
 * by extension (content decides when the extension says nothing). Throws `manifest_syntax`
 * for unreadable text and `manifest_invalid`, with one line and one `details.issues` entry per
 * problem, for text that does not match the schema.
 */
export function parseEnvironment(text: string, file: string): Environment {
  return parseWithSchema(EnvironmentSchema, text, file, 'environment manifest');
}

/**
 * YAML or JSON text validated by any zod schema, with the manifest's error reporting: syntax
 * errors with line and column, then one `path: expected X, found Y` line per problem.
 */
export function parseWithSchema<T>(schema: z.ZodType<T>, text: string, file: string, what: string): T {
  const data = readDocument(text, file);
  // reportInput lets a failed cross-field check show the defaulted value it compared.
  const result = schema.safeParse(data, { reportInput: true });
  if (result.success) return result.data;
  const issues = toManifestIssues(result.error.issues, data, schema);
  // A plan is not a manifest: its errors say what the file is, code included.
  const code = what === 'plan' ? 'plan_invalid' : 'manifest_invalid';
  throw new BerthError(code, formatIssues(file, issues, what), { details: { file, issues } });
}

/**
 * Reads and parses a manifest file, with the pin of its lock file (`env.lock.json` beside
 * `env.yaml`) when the manifest pins no digest itself; `manifest_not_found` when there is no such file.
 */
export async function loadEnvironment(path: string): Promise<Environment> {
  const text = await readInputFile(path, 'environment manifest', path, 'manifest');
  return applyLockFile(path, parseEnvironment(text, path));
}

/**
 * The text of a file the user named (a plan, a manifest): `PREFIX_not_found` when there is none,
 * `PREFIX_unreadable` naming why for a directory, a missing permission or any other read failure.
 * @param shown the path as the user wrote it, for the message.
 */
export async function readInputFile(path: string, what: string, shown: string, prefix: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const ids = { details: { file: shown }, cause: err };
    if (code === 'ENOENT') throw new BerthError(`${prefix}_not_found`, `${what} ${shown} does not exist`, ids);
    const why = code === 'EISDIR' ? 'it is a directory, not a file' : code === 'EACCES' || code === 'EPERM' ? 'no permission to read it' : (err as Error).message;
    throw new BerthError(`${prefix}_unreadable`, `cannot read ${what} ${shown}: ${why}`, ids);
  }
}
