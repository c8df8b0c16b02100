import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exportRun, exportRunToFile } from '../../host/record';
import type { Store } from '../../host/store';

/**
 * Exports every run of a store twice at the same moment, whole in memory (`exportRun`, what
 * `berth check` reads) and streamed page by page (`exportRunToFile`, what `berth export` writes),
 * and names the runs whose two texts or digests differ, with the first differing bytes.
 */
export async function streamedExportDifferences(store: Store, now = Date.now(), pageRows = 3): Promise<string[]> {
  const dir = mkdtempSync(join(tmpdir(), 'berth-export-eq-'));
  const out: string[] = [];
  try {
    for (const run of await store.listRuns()) {
      const whole = await exportRun(store, run.id, now);
      const file = join(dir, `${run.id}.json`);
      const streamed = await exportRunToFile(store, run.id, now, file, { pageRows });
      const text = readFileSync(file, 'utf8');
      if (text === whole.text && streamed.digest === whole.record.digest && streamed.bytes === Buffer.byteLength(whole.text)) continue;
      let i = 0;
      while (i < text.length && text[i] === whole.text[i]) i++;
      out.push(`${run.id} (${run.kind}): streamed export differs at byte ${i}: ${JSON.stringify(text.slice(Math.max(0, i - 80), i + 80))} vs ${JSON.stringify(whole.text.slice(Math.max(0, i - 80), i + 80))}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return out;
}
