import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

let built: Buffer | undefined;

/** The exchange racer (`exchange-racer.c`), built static on this machine once per process. */
export function exchangeRacer(): Buffer {
  if (!built) {
    const dir = mkdtempSync(join(tmpdir(), 'berth-racer-'));
    execFileSync('cc', ['-static', '-O2', '-o', join(dir, 'racer'), join(dirname(fileURLToPath(import.meta.url)), 'exchange-racer.c')]);
    built = readFileSync(join(dir, 'racer'));
    execFileSync('rm', ['-rf', dir]);
  }
  return built;
}
