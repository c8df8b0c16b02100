/**
 * `berth export RUN [--out FILE] [--store S] [--json] [--debug]` on its own: host/cli/bin.mjs starts
 * this bundle (dist/berth-export.mjs) instead of the CLI's when the command is `export` with no
 * extension, so an export loads the store and the record module only, not the runtime, the Docker
 * and model clients and every other command (74 MB of RSS before the first row is read; a long
 * run's export stayed above 100 MB on that floor; bench/RESULTS.md, long session 11). Same output,
 * errors and exit codes as `berth export` in the full CLI (test/integration/export-entry.test.ts).
 */
import { createReadStream, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { parseArgs } from 'node:util';
import { BerthError, isBerthError } from '../errors';
import { exportRunToFile } from '../record/stream-record';
import { isPostgresUrl, lazyPostgresStore } from '../store/open-store';
import { openSqliteStore } from '../store/sqlite/sqlite-store';
import { systemClock } from '../support/clock';
import { builtInPolicies } from './built-in-policies';
import { emit, reportError } from './output';
import { requireStore, storePath } from './store-path';

/** True when this entry can run the command: `export` without `--extension` (an extension's kinds need the full host). */
export async function exportMain(argv: string[]): Promise<number> {
  let json = false;
  let debug = false;
  try {
    const { values, positionals } = parseArgs({
      args: argv.slice(1),
      allowPositionals: true,
      options: { json: { type: 'boolean', default: false }, debug: { type: 'boolean', default: false }, store: { type: 'string' }, out: { type: 'string' } },
    });
    json = values.json;
    debug = values.debug;
    const runId = positionals[0];
    if (!runId) throw new BerthError('usage', 'berth export needs RUN');
    const path = storePath(values.store);
    if (!isPostgresUrl(path)) requireStore(path);
    const store = isPostgresUrl(path) ? lazyPostgresStore(path) : openSqliteStore(path);
    try {
      if (!values.out) {
        const dir = mkdtempSync(join(tmpdir(), 'berth-export-'));
        try {
          const file = join(dir, 'record.json');
          await exportRunToFile(store, runId, systemClock.now(), file, { policies: builtInPolicies });
          await pipeline(createReadStream(file), process.stdout, { end: false });
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
        return 0;
      }
      const { digest, bytes } = await exportRunToFile(store, runId, systemClock.now(), values.out, { policies: builtInPolicies });
      emit(json, { runId, file: values.out, digest, bytes }, () => `exported run ${runId} to ${values.out} (${digest})`);
      return 0;
    } finally {
      await store.close();
    }
  } catch (err) {
    reportError(json, err, debug);
    // The full CLI's exit codes (host-right.ts EXIT), not imported: that module brings the runtime's drive loop.
    return isBerthError(err) && err.code === 'usage' ? 2 : 1;
  }
}

process.exitCode = await exportMain(process.argv.slice(2));
