import { z } from 'zod';
import { EnvironmentSchema } from './schema';

/** Where the committed JSON Schema lives, relative to the repository root. */
export const JSON_SCHEMA_FILE = 'environment/manifest.schema.json';

/**
 * The manifest's JSON Schema, as editors and other tools see it: the input side, where fields
 * with defaults are optional. Cross-field checks (heartbeat below ttl, path rules) live only in
 * zod; the JSON Schema is a guide for authors, parseEnvironment is the judge.
 */
export function environmentJsonSchema(): string {
  const schema = z.toJSONSchema(EnvironmentSchema, { io: 'input', unrepresentable: 'any' });
  return JSON.stringify({ ...schema, title: 'Berth Environment manifest' }, null, 2) + '\n';
}
