/**
 * `npm run bench -- NAME` runs bench/NAME.ts. A suite's default export receives `report`,
 * which prints one figure per line as `NAME.figure = 1.07x` (a ratio against a baseline
 * measured in the same run) or `NAME.figure = 12.5` (an absolute; the unit is in the name).
 */
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export type Report = (figure: string, value: number, kind: 'ratio' | 'absolute') => void;
export type Suite = (report: Report) => Promise<void>;

const here = dirname(fileURLToPath(import.meta.url));
const suites = readdirSync(here)
  .filter((f) => f.endsWith('.ts') && f !== 'run.ts' && !f.startsWith('_'))
  .map((f) => f.slice(0, -3));

const names = process.argv.slice(2).filter((a) => !a.startsWith('-'));
if (names.length === 0) {
  console.error(`usage: npm run bench -- NAME   (suites: ${suites.join(', ')})`);
  process.exit(2);
}
for (const name of names) {
  if (!suites.includes(name)) {
    console.error(`unknown bench suite "${name}"; suites: ${suites.join(', ')}`);
    process.exit(2);
  }
}
for (const name of names) {
  const mod = (await import(join(here, `${name}.ts`))) as { default: Suite };
  await mod.default((figure, value, kind) => {
    const shown = Math.abs(value) >= 100 ? value.toFixed(0) : value.toFixed(kind === 'ratio' ? 2 : 1);
    console.log(`${name}.${figure} = ${shown}${kind === 'ratio' ? 'x' : ''}`);
  });
}
