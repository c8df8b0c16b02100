import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runNode } from '../support/child';
import { requireEngine } from '../support/docker-engine';
import { bundledCli, removeHostArtifacts } from '../support/plan-fixture';

// The programs of examples/sdk/ (typechecked with the rest of the tree by `npx tsc --noEmit`),
// run as a user runs them: tsx, a store of their own, the real engine.

const tsx = join(process.cwd(), 'node_modules', 'tsx', 'dist', 'cli.mjs');
const hostId = `sdk-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
let dir: string | undefined;
afterEach(async () => {
  await removeHostArtifacts(await requireEngine(), hostId);
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

const lastLine = <T>(stdout: string): T => JSON.parse(stdout.trim().split('\n').at(-1)!) as T;
type Said = { runId: string; state: string; settled: boolean; events: number; lastSeq: number; steps: Array<{ step: string; exitCode: number; outcome: string }> };

describe('the SDK examples', { timeout: 600_000 }, () => {
  it('examples/sdk/c-hello.ts submits the c-hello plan, follows its commits to the end and prints every step ok; run again after the last sequence it prints no event twice', async () => {
    await requireEngine();
    dir = mkdtempSync(join(tmpdir(), 'berth-sdk-'));
    cpSync(join(process.cwd(), 'examples', 'c-hello'), join(dir, 'c-hello'), { recursive: true });
    const env = { BERTH_HOST_ID: hostId };
    const lock = await runNode(await bundledCli(), ['env', 'lock', join(dir, 'c-hello', 'env.yaml')], env, 60_000);
    expect(lock.code, lock.stderr).toBe(0);
    const store = join(dir, 'berth.db');
    const first = await runNode(tsx, ['examples/sdk/c-hello.ts', store, join(dir, 'c-hello', 'plan.yaml')], env, 400_000);
    expect(first.code, first.stderr).toBe(0);
    const said = lastLine<Said>(first.stdout);
    expect(said.state).toBe('completed');
    expect(said.steps.map((s) => [s.step, s.exitCode, s.outcome])).toEqual([['build', 0, 'ok'], ['test', 0, 'ok'], ['package', 0, 'ok']]);
    // Every commit of the run was followed, in order, each once.
    const seqs = [...first.stderr.matchAll(/^ {2}#(\d+) /gm)].map((m) => Number(m[1]));
    expect(seqs.length).toBe(said.events);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(new Set(seqs).size).toBe(seqs.length);
    expect(said.lastSeq).toBe(seqs.at(-1));

    // The same request id is the same run; following from the last sequence seen yields nothing again.
    const again = await runNode(tsx, ['examples/sdk/c-hello.ts', store, join(dir, 'c-hello', 'plan.yaml'), '--after-seq', String(said.lastSeq)], env, 400_000);
    expect(again.code, again.stderr).toBe(0);
    const resumed = lastLine<Said>(again.stdout);
    expect(resumed).toMatchObject({ runId: said.runId, state: 'completed', events: 0 });
  });

  it('examples/sdk/custom-task.ts registers a task kind, drives its run to completed with one subtask per text, and the same texts again are the same run', async () => {
    dir = mkdtempSync(join(tmpdir(), 'berth-sdk-'));
    const store = join(dir, 'berth.db');
    const env = { BERTH_HOST_ID: hostId };
    const first = await runNode(tsx, ['examples/sdk/custom-task.ts', store, 'one two three', 'four five', 'six'], env, 120_000);
    expect(first.code, first.stderr).toBe(0);
    const said = lastLine<{ runId: string; state: string; result: unknown }>(first.stdout);
    expect(said).toMatchObject({ state: 'completed', result: { words: 6, texts: 3 } });
    const again = await runNode(tsx, ['examples/sdk/custom-task.ts', store, 'one two three', 'four five', 'six'], env, 120_000);
    expect(again.code, again.stderr).toBe(0);
    expect(lastLine<{ runId: string }>(again.stdout).runId).toBe(said.runId);
  });
});
