import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { attemptsOf, attemptState, OutputWriter } from '../../host/output';
import { CHUNK, loudRun, RUN } from '../support/loud-output';
import { STORE_KINDS, stopSharedPostgres, tempStoreOf } from '../support/store-kinds';

afterAll(stopSharedPostgres, 60_000);

const until = async (cond: () => Promise<boolean>) => {
  for (let i = 0; i < 400 && !(await cond()); i++) await new Promise((r) => setTimeout(r, 25));
  expect(await cond()).toBe(true);
};

describe.each(STORE_KINDS)('live output on %s', (kind) => {
  let t: Awaited<ReturnType<typeof tempStoreOf>> | undefined;
  afterEach(async () => {
    await t?.cleanup();
    t = undefined;
  });

  it('writes output while the command runs, so another handle on the store reads it before the attempt ends', async () => {
    t = await tempStoreOf(kind);
    const reader = await t.open();
    const w = new OutputWriter(t.store, { runId: 'run_a', source: 'step:0', label: 'build', flushMs: 5 });
    w.push('stdout', 'line 1\n');
    await until(async () => (await reader.listOutput({ runId: 'run_a' })).some((c) => c.text.includes('line 1')));
    // Not ended yet: the attempt is running while the run is live, interrupted once it is not.
    const mid = attemptsOf(await reader.listOutput({ runId: 'run_a' }));
    expect(mid).toHaveLength(1);
    expect(mid[0]!.end).toBeNull();
    expect(attemptState(mid[0]!, mid, true)).toBe('running');
    expect(attemptState(mid[0]!, mid, false)).toBe('interrupted');
    w.push('stderr', 'warn\n');
    w.push('stdout', 'line 2\n');
    await w.end('exit 0 after 5 ms');
    const all = await reader.listOutput({ runId: 'run_a' });
    const [a] = attemptsOf(all);
    expect(a!.parts).toEqual([{ channel: 'stdout', text: 'line 1\n' }, { channel: 'stderr', text: 'warn\n' }, { channel: 'stdout', text: 'line 2\n' }]);
    expect(a!.end).toBe('exit 0 after 5 ms');
    // A reader after N gets exactly the later chunks, in order.
    const seqs = all.map((c) => c.seq);
    expect([...seqs].sort((x, y) => x - y)).toEqual(seqs);
    expect((await reader.listOutput({ runId: 'run_a', afterSeq: seqs[0]! })).map((c) => c.seq)).toEqual(seqs.slice(1));
    expect(await reader.lastOutputSeq()).toBe(seqs.at(-1));
    expect(await reader.listOutput({ runId: 'run_other' })).toEqual([]);
  });

  it('stores at most the cap of an attempt, counts what it cut, and keeps the end of each stream', async () => {
    t = await tempStoreOf(kind);
    const w = new OutputWriter(t.store, { runId: 'run_b', source: 'step:1', label: 'noisy', capBytes: 1000, flushMs: 5 });
    for (let i = 0; i < 500; i++) w.push('stdout', `line ${String(i).padStart(4, '0')}\n`);
    await w.end('exit 0');
    const chunks = await t.store.listOutput({ runId: 'run_b' });
    const stored = chunks.filter((c) => c.channel !== 'end').reduce((n, c) => n + c.text.length, 0);
    expect(stored).toBeLessThanOrEqual(1000 + 16_000);
    const [a] = attemptsOf(chunks);
    expect(a!.cutBytes).toBe(500 * 10 - 1000);
    const text = a!.parts.map((p) => p.text).join('');
    expect(text.startsWith('line 0000\n')).toBe(true);
    expect(text).toContain(`[... ${500 * 10 - 1000} bytes cut ...]`);
    expect(text.endsWith('line 0499\n')).toBe(true);
    expect(a!.end).toBe('exit 0');
  });

  it('reads a run\'s output tails without the rest: per attempt its start, its end and its newest chunks back to the characters asked, the same attempts and tails as all chunks give', async () => {
    t = await tempStoreOf(kind);
    await loudRun(t.store);
    const tails = await t.store.listOutputTails(RUN, 16_000);
    // Three attempts (6.4 MB, 1,500 rows, one line): a few chunks each beyond what is asked.
    expect(tails.reduce((n, c) => n + c.text.length, 0)).toBeLessThanOrEqual(3 * (16_000 + 4 * CHUNK));
    expect(tails.map((c) => c.seq)).toEqual([...tails.map((c) => c.seq)].sort((x, y) => x - y));
    const end = (a: ReturnType<typeof attemptsOf>[number]) => ({ ...a, parts: a.parts.map((p) => p.text).join('').slice(-16_000) });
    expect(attemptsOf(tails).map(end)).toEqual(attemptsOf(await t.store.listOutput({ runId: RUN })).map(end));
    expect(await t.store.listOutputTails('run_other', 16_000)).toEqual([]);
  });

  it('counts the store writes of an attempt and the time they took, the figure a step profile reads', async () => {
    t = await tempStoreOf(kind);
    const w = new OutputWriter(t.store, { runId: 'run_d', source: 'step:0', label: 'counted', flushMs: 1 });
    w.push('stdout', 'first\n');
    await until(async () => (await t!.store.listOutput({ runId: 'run_d' })).length === 1);
    expect(w.writes.count).toBe(1);
    w.push('stdout', 'second\n');
    await w.end('exit 0');
    // The second line and the end chunk go in one write: the end flushes what is pending with it.
    expect(w.writes.count).toBe(2);
    expect(w.writes.ms).toBeGreaterThan(0);
    expect(w.writes.maxMs).toBeLessThanOrEqual(w.writes.ms);
  });

  it('numbers chunks written by two writers at once so a reader following the sequence misses none', async () => {
    t = await tempStoreOf(kind);
    const second = await t.open();
    const writers = [new OutputWriter(t.store, { runId: 'run_c', source: 'tool:a', label: 'a', flushMs: 1 }), new OutputWriter(second, { runId: 'run_c', source: 'tool:b', label: 'b', flushMs: 1 })];
    const seen: number[] = [];
    let after = 0;
    const follow = async () => {
      for (const c of await t!.store.listOutput({ runId: 'run_c', afterSeq: after })) (seen.push(c.seq), (after = c.seq));
    };
    for (let i = 0; i < 60; i++) {
      writers[i % 2]!.push('stdout', `${i}\n`);
      if (i % 7 === 0) await follow();
      await new Promise((r) => setTimeout(r, 2));
    }
    await Promise.all(writers.map((w) => w.end('done')));
    await follow();
    const all = (await t.store.listOutput({ runId: 'run_c' })).map((c) => c.seq);
    expect(seen).toEqual(all);
    const text = attemptsOf(await t.store.listOutput({ runId: 'run_c' })).flatMap((a) => a.parts.map((p) => p.text)).join('');
    expect(text.split('\n').filter(Boolean).map(Number).sort((x, y) => x - y)).toEqual(Array.from({ length: 60 }, (_, i) => i));
  });
});
