import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { recordDigest } from '../../host/record/canonical';
import { runNode } from '../support/child';
import { bundledCli, lastJson, planFixture } from '../support/plan-fixture';
import { readStore } from '../support/temp-store';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

describe('berth import of a record whose artifact paths leave the workspace', { timeout: 180_000 }, () => {
  it('refuses a resealed record with an artifact path that has a ".." component or is absolute, naming the field, and writes nothing', async () => {
    fx = await planFixture([{ name: 'make', run: 'mkdir -p out && echo built > out/a.txt', artifacts: ['out/*.txt'] }]);
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr.slice(-500)).toBe(0);
    const runId = lastJson<{ run: { id: string } }>(end).run.id;
    const file = join(fx.dir, 'record.json');
    expect((await fx.cli(['export', runId, '--out', file])).code).toBe(0);

    const other = join(fx.dir, 'other.db');
    for (const path of ['../../../../tmp/landed.txt', '/etc/cron.d/landed', 'out/../../landed.txt']) {
      const doc = JSON.parse(readFileSync(file, 'utf8')) as { artifacts: Array<{ path: string }>; digest?: string };
      expect(doc.artifacts).toHaveLength(1);
      doc.artifacts[0]!.path = path;
      delete doc.digest;
      // Resealed: the digest only proves the file was not changed after it was sealed, not by whom it was.
      doc.digest = recordDigest(doc);
      const hostile = join(fx.dir, 'hostile.json');
      writeFileSync(hostile, JSON.stringify(doc));
      const imp = await runNode(await bundledCli(), ['import', hostile, '--json', '--store', other]);
      // Before: exit 0, and `berth artifacts RUN` listed the path as the run's file.
      expect(imp.code, `${path}: ${imp.stdout}`).toBe(1);
      const err = JSON.parse(imp.stderr) as { error: { code: string; message: string } };
      expect(err.error.code).toBe('record_invalid');
      expect(err.error.message).toContain('artifacts.0.path');
      expect(await readStore(other, (s) => s.listRuns())).toEqual([]);
    }
    // The record as exported still imports.
    const ok = await runNode(await bundledCli(), ['import', file, '--store', other]);
    expect(ok.code, ok.stderr).toBe(0);
  });
});
