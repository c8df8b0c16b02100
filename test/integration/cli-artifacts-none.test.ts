import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openStore } from '../../host/store';
import { runNode } from '../support/child';
import { bundledCli } from '../support/plan-fixture';

let dir = '';
afterEach(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
  dir = '';
});

describe('berth artifacts --out on a run without artifacts', () => {
  it('says the run has none and that nothing was written, creates no directory, and exits 0', async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-artifacts-none-'));
    const path = join(dir, 'berth.db');
    const store = await openStore(path);
    await store.commit({ sessionId: 'ses_1', label: 'submit', createSession: { meta: { plan: 'p.yaml' } }, runs: [{ id: 'run_1', kind: 'plan', submissionId: null, rootTaskId: null, versions: {} }] });
    await store.close();
    const out = join(dir, 'out');
    const r = await runNode(await bundledCli(), ['artifacts', 'run_1', '--out', out, '--store', path]);
    expect(r.code, r.stderr).toBe(0);
    // Before: "fetched 0 of 0 artifact(s) to DIR", as if DIR now held something.
    expect(r.stdout.trim()).toBe(`run run_1 has no artifacts: nothing written to ${out}`);
    expect(existsSync(out)).toBe(false);
    const j = await runNode(await bundledCli(), ['artifacts', 'run_1', '--out', out, '--json', '--store', path]);
    expect(JSON.parse(j.stdout)).toMatchObject({ runId: 'run_1', out, artifacts: [], fetched: [] });
  });
});
