/**
 * Where `export_vs_raw`'s time goes: the record bench's 10,000-entry run exported, timed by phase
 * (rows read, document built, canonical text and digest). `npx tsx bench/_record-export-phases.ts`
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSqliteStore } from '../host/store';
import { readRunRows, sealRecord } from '../host/record';
import { recordDocument } from '../host/record/build-record';
import { seedRun } from './record';

const dir = mkdtempSync(join(tmpdir(), 'berth-bench-record-'));
const store = openSqliteStore(join(dir, 'record.db'));
const runId = await seedRun(store, 0, 10_000);
const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const t = { read: [] as number[], doc: [] as number[], seal: [] as number[] };
for (let k = 0; k < 9; k++) {
  let t0 = performance.now();
  const rows = await readRunRows(store, runId, Date.now());
  t.read.push(performance.now() - t0);
  t0 = performance.now();
  const { doc, entryTexts } = recordDocument(rows, Date.now());
  t.doc.push(performance.now() - t0);
  t0 = performance.now();
  sealRecord(doc as Record<string, unknown>, { entries: `[${entryTexts.join(',')}]` });
  t.seal.push(performance.now() - t0);
}
console.log(`read ${med(t.read).toFixed(1)} ms, document ${med(t.doc).toFixed(1)} ms, seal ${med(t.seal).toFixed(1)} ms`);
await store.close();
rmSync(dir, { recursive: true, force: true });
