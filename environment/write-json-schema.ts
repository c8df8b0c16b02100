/** Regenerates environment/manifest.schema.json: `npx tsx environment/write-json-schema.ts`. */
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { environmentJsonSchema } from './json-schema';

const out = join(dirname(fileURLToPath(import.meta.url)), 'manifest.schema.json');
writeFileSync(out, environmentJsonSchema());
console.log(`wrote ${out}`);
