/**
 * The host side of a big workspace's upload: scanHostDir and packHostDir over 20,000 two-byte
 * files in 100 directories (a node_modules-like tree), three rounds. Run: npx tsx bench/_pack-prof.ts
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { packHostDir, scanHostDir } from '../host/sandbox/archive-pack';

const dir = mkdtempSync(join(tmpdir(), 'berth-pack-'));
try {
  for (let d = 0; d < 100; d++) {
    mkdirSync(join(dir, `d${d}`));
    for (let f = 0; f < 200; f++) writeFileSync(join(dir, `d${d}`, `f${f}`), `${f}\n`);
  }
  for (let round = 0; round < 3; round++) {
    const t0 = performance.now();
    const scan = await scanHostDir(dir);
    const t1 = performance.now();
    let bytes = 0;
    for await (const c of packHostDir(dir, scan.entries, ['workspace'], { uid: 1000, gid: 1000 }) as unknown as AsyncIterable<Buffer>) bytes += c.length;
    const t2 = performance.now();
    console.log(`pack.scan_20k_files_ms = ${(t1 - t0).toFixed(0)}`);
    console.log(`pack.pack_20k_files_ms = ${(t2 - t1).toFixed(0)} (${bytes} bytes, ${scan.entries.length} entries)`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
