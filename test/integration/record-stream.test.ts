import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { decideApproval, listApprovals } from '../../host/agent';
import { exportRun, exportRunToFile } from '../../host/record';
import { agentWorld, type AgentWorld } from '../support/agent-fixture';
import type { Store } from '../../host/store';
import { streamedExportDifferences } from '../support/export-equality';
import { lastJson, planFixture } from '../support/plan-fixture';
import { readStore } from '../support/temp-store';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
let w: AgentWorld | undefined;
afterEach(async () => {
  await fx?.cleanup();
  await w?.cleanup();
  fx = undefined;
  w = undefined;
}, 300_000);

const PAGED: Record<string, (args: unknown[]) => boolean> = {
  listTasks: ([f]) => (f as { page?: unknown }).page !== undefined,
  listEffects: ([f]) => (f as { page?: unknown }).page !== undefined,
  listSnapshots: ([f]) => (f as { page?: unknown }).page !== undefined,
  listEntries: ([, f]) => (f as { limit?: unknown } | undefined)?.limit !== undefined,
  listCommits: ([, , limit]) => limit !== undefined,
  listCost: ([f]) => (f as { page?: unknown }).page !== undefined,
};

/**
 * A store that keeps, per list method that grows with a run, the longest answer any one call gave,
 * and counts the calls that asked for the whole list (no page, no limit).
 */
function longestAnswers(store: Store): { store: Store; rows: Map<string, number>; whole: Map<string, number> } {
  const rows = new Map<string, number>();
  const whole = new Map<string, number>();
  const proxy = new Proxy(store, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (typeof prop !== 'string' || typeof v !== 'function' || !prop.startsWith('list')) return v;
      return async (...args: unknown[]) => {
        const answer = (await (v as (...a: unknown[]) => Promise<unknown>).apply(target, args)) as unknown;
        if (!PAGED[prop]) return answer;
        if (!PAGED[prop]!(args)) whole.set(prop, (whole.get(prop) ?? 0) + 1);
        if (Array.isArray(answer)) rows.set(prop, Math.max(rows.get(prop) ?? 0, answer.length));
        return answer;
      };
    },
  });
  return { store: proxy, rows, whole };
}

// Lists the export reads whole whatever the run's length would be a page no longer than this.
const PAGE = 3;

describe('berth export streams the record', { timeout: 300_000 }, () => {
  it('writes a plan run and its fork byte for byte as the whole export does, reading every list that grows with the run (tasks, effects, snapshots, entries, commits, cost samples) in pages', async () => {
    fx = await planFixture([
      { name: 'one', run: 'echo 1 > a.txt' },
      { name: 'two', run: 'echo 2 >> a.txt', artifacts: ['a.txt'] },
      { name: 'three', run: 'echo 3 >> a.txt; echo err >&2' },
      { name: 'four', run: 'cat a.txt', replay: 'never' },
      { name: 'five', run: 'echo 5 >> a.txt' },
      { name: 'six', run: 'echo 6 >> a.txt' },
      { name: 'seven', run: 'wc -l a.txt' },
    ]);
    const end = await fx.cli(['run', fx.plan, '--json']);
    expect(end.code, end.stderr).toBe(0);
    const original = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    const fork = await fx.cli(['fork', original, '--at', 'three', '--json']);
    expect(fork.code, fork.stderr).toBe(0);

    // `berth export` itself, to a file and to stdout: the same bytes as the whole export of the same run.
    const file = join(fx.dir, 'streamed.json');
    const ex = await fx.cli(['export', original, '--out', file, '--json']);
    expect(ex.code, ex.stderr).toBe(0);
    const { digest, bytes } = lastJson<{ digest: string; bytes: number }>(ex);
    const text = readFileSync(file, 'utf8');
    expect(Buffer.byteLength(text)).toBe(bytes);
    const record = JSON.parse(text) as { digest: string; exportedAt: number; tasks: unknown[] };
    expect(record.digest).toBe(digest);
    expect(record.tasks.length).toBeGreaterThan(PAGE);
    const sameText = (a: string, b: string) => expect(a === b, `texts differ from byte ${[...a].findIndex((c, i) => c !== b[i])}`).toBe(true);
    // The CLI's export knows the retry budget of every kind its host registers; the whole export
    // here is given the same budgets (their values are run-record-contract's to check).
    const retry = (record as unknown as { contract: { retry: Array<{ kind: string; version: number; maxRetries: number; restartLimit: number }> } }).contract.retry;
    expect(retry.map((r) => typeof r.maxRetries)).toEqual(retry.map(() => 'number'));
    const policies = (kind: string, version: number) => retry.find((r) => r.kind === kind && r.version === version);
    sameText(text, (await fx.read((s) => exportRun(s, original, record.exportedAt, { policies }))).text);
    expect(digest).toBe((await fx.read((s) => exportRun(s, original, record.exportedAt, { policies }))).record.digest);
    const toStdout = await fx.cli(['export', original]);
    expect(toStdout.code, toStdout.stderr).toBe(0);
    const atStdout = (JSON.parse(toStdout.stdout) as { exportedAt: number }).exportedAt;
    sameText(toStdout.stdout, (await fx.read((s) => exportRun(s, original, atStdout, { policies }))).text);

    // In pages of three rows, every run of the store (the fork carries its parent's snapshots as history).
    await fx.read(async (s) => {
      const runs = await s.listRuns();
      expect(runs).toHaveLength(2);
      for (const run of runs) {
        const longest = longestAnswers(s);
        const at = Date.now();
        const out = join(fx!.dir, `${run.id}.json`);
        const streamed = await exportRunToFile(longest.store, run.id, at, out, { pageRows: PAGE });
        const expected = await exportRun(s, run.id, at);
        sameText(readFileSync(out, 'utf8'), expected.text);
        expect(streamed.digest).toBe(expected.record.digest);
        const r = expected.record;
        if (run.id !== original) expect(r.isolation.snapshots.some((x) => x.runId === original), 'the fork carries its parent\'s snapshots').toBe(true);
        expect(r.tasks.length + r.effects.length + r.isolation.snapshots.length + r.entries.length + r.commits.length).toBeGreaterThan(5 * PAGE);
        // Every read of a list that grows with the run asked for a page (the export's, and the cost summary's, of 500).
        expect(Object.fromEntries(longest.whole)).toEqual({});
        expect(longest.rows.get('listTasks')).toBeLessThanOrEqual(PAGE);
        expect(longest.rows.get('listEntries')).toBeLessThanOrEqual(PAGE);
        expect(longest.rows.get('listCommits')).toBeLessThanOrEqual(PAGE);
        expect(r.cost.samples.length).toBeGreaterThan(PAGE);
        expect(longest.rows.get('listCost')).toBeLessThanOrEqual(PAGE);
      }
    });
    await readStore(fx.store, async (s) => expect(await streamedExportDifferences(s)).toEqual([]));
  });

  it('writes an agent run with an approval and a second turn byte for byte as the whole export does', async () => {
    w = await agentWorld([
      { toolCalls: [{ name: 'exec', arguments: { command: 'echo ran >> /tmp/approved.log; cat /tmp/approved.log' } }] },
      { content: 'finished' },
      { toolCalls: [{ name: 'exec', arguments: { command: 'echo again' } }] },
      { content: 'done again' },
    ]);
    const { run } = await w.start('run it after approval', { settings: { requireApproval: ['exec'] } });
    await w.rt.kernel.waitForRun(run.id, { states: ['awaiting_approval'] });
    const [pending] = await listApprovals(w.rt.store, run.id);
    await decideApproval(w.rt.store, { runId: run.id, id: pending!.approvalId, decision: 'approve', digest: pending!.digest, actor: 'user:reviewer', now: Date.now() });
    expect((await w.rt.kernel.waitForRun(run.id)).state).toBe('completed');
    expect(await streamedExportDifferences(w.rt.store)).toEqual([]);
    const at = Date.now();
    const out = join(w.dir, 'agent.json');
    await exportRunToFile(w.rt.store, run.id, at, out, { pageRows: 2 });
    const whole = await exportRun(w.rt.store, run.id, at);
    expect(readFileSync(out, 'utf8') === whole.text).toBe(true);
    expect(whole.record.approvals).toHaveLength(1);
    expect(whole.record.run.models).toEqual(['scripted-1']);
  });
});
