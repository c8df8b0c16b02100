import { z } from 'zod';
import { RunRecordSchema } from './schema';

/** Where the committed JSON Schema of run records lives, beside the manifest's. */
export const RECORD_JSON_SCHEMA_FILE = 'environment/run-record.schema.json';

/** The run record's JSON Schema, generated from the zod schema (the source of truth). */
export function runRecordJsonSchema(): string {
  const schema = z.toJSONSchema(RunRecordSchema, { io: 'output', unrepresentable: 'any' });
  return JSON.stringify({ ...schema, title: 'Berth run record (berth export)' }, null, 2) + '\n';
}
