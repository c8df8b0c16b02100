/** Regenerates environment/run-record.schema.json: `npx tsx host/record/write-json-schema.ts`. */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { RECORD_JSON_SCHEMA_FILE, runRecordJsonSchema } from './json-schema';

const out = join(fileURLToPath(new URL('../..', import.meta.url)), RECORD_JSON_SCHEMA_FILE);
writeFileSync(out, runRecordJsonSchema());
console.log(`wrote ${out}`);
